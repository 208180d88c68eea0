"""A test client of the wire protocol (docs/interfaces.md, section 3), signing with the munge
command-line tools as any user: an independent implementation of the framing, so that the
daemon is tested against something other than its own client code."""

import json
import os
import socket
import struct
import subprocess
import tempfile

from clustertest import CLUSTER_DIR

MUNGE_SOCKET = os.path.join(CLUSTER_DIR, "munge", "munge.socket")


def encode(payload: bytes, user=None) -> bytes:
    cmd = ["munge", "-S", MUNGE_SOCKET, "-i", "-"]
    if user:
        cmd = ["runuser", "-u", user, "--"] + cmd
    proc = subprocess.run(cmd, input=payload, capture_output=True, timeout=30)
    if proc.returncode != 0:
        raise AssertionError(f"munge failed: {proc.stderr!r}")
    return proc.stdout.strip()


def decode(credential: bytes):
    """Returns (uid, payload)."""
    with tempfile.TemporaryDirectory() as d:
        meta = os.path.join(d, "meta")
        proc = subprocess.run(["unmunge", "-S", MUNGE_SOCKET, "-m", meta, "-N", "-k", "UID"],
                              input=credential, capture_output=True, timeout=30)
        if proc.returncode != 0:
            raise AssertionError(f"unmunge failed: {proc.stderr!r}")
        uid = int(open(meta).read().split(":")[1].strip())
        return uid, proc.stdout


class WireClient:
    def __init__(self, port, host="127.0.0.1", user=None, timeout=30):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.user = user
        self.next_id = 1

    def close(self):
        self.sock.close()

    def send_frame(self, body: bytes):
        self.sock.sendall(struct.pack(">I", len(body)) + body)

    def read_frame(self) -> bytes:
        header = self._read(4)
        (n,) = struct.unpack(">I", header)
        return self._read(n)

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed")
            buf += chunk
        return buf

    def call(self, message: dict) -> dict:
        """Signs and sends one message, returns the decoded reply (checking it is root's)."""
        message = dict(message)
        message.setdefault("v", 1)
        message.setdefault("id", self.next_id)
        self.next_id += 1
        self.send_frame(encode(json.dumps(message).encode(), self.user))
        uid, payload = decode(self.read_frame())
        if uid != 0:
            raise AssertionError(f"reply signed by uid {uid}")
        return json.loads(payload)
