"""Unit tests of the state hand-over of elastic_mpi.torch (handover.py) in one process, without
MPI: the split of a training state into a pickled skeleton and the large tensors that travel as
their own messages, its join on the receiving side (loadable by torch's load_state_dict), and the
binomial tree over rank 0 and the newcomers. The messages between ranks are python.torch_ddp_rescale's
(and bench.torch_rescale_pause's, with 100 MB)."""

import collections
import unittest

import numpy as np
import torch
from torch import nn

from elastic_mpi.torch import handover


class HandoverTest(unittest.TestCase):
    def test_split_and_join(self):
        # Large tensors become slots (they travel as their own messages), small ones stay in the
        # pickled skeleton; join() puts the same tensor objects back, OrderedDicts with _metadata.
        model = nn.Sequential(nn.Linear(128, 256), nn.BatchNorm1d(256))
        optimizer = torch.optim.Adam(model.parameters())
        model(torch.randn(4, 128)).sum().backward()
        optimizer.step()
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "pair": (torch.ones(20000), 3),
                 "list": [torch.zeros(3)], "rng": np.random.get_state(),
                 "sparse": torch.sparse_coo_tensor(torch.arange(20000).unsqueeze(0), torch.ones(20000), (20000,))}
        skeleton, tensors = handover.split(state)
        self.assertEqual(len(tensors), 4)  # the weight, its two Adam moments, the tuple's tensor
        self.assertTrue(all(t.numel() * t.element_size() >= handover.LARGE_BYTES for t in tensors))
        self.assertIsInstance(skeleton["model"]["0.weight"], handover.Slot)
        self.assertIsInstance(skeleton["model"]["0.bias"], torch.Tensor)  # 1 KiB: in the skeleton
        self.assertTrue(skeleton["sparse"].is_sparse)  # not a dense message: pickled with the rest
        self.assertIsInstance(skeleton["model"], collections.OrderedDict)
        self.assertEqual(skeleton["model"]._metadata, state["model"]._metadata)
        self.assertEqual([s.shape for s in handover.slots(skeleton)], [tuple(t.shape) for t in tensors])
        # Through torch.save, as the newcomers get the skeleton.
        skeleton = handover.deserialize(handover.serialize(skeleton).getvalue())
        again = handover.join(skeleton, [t.clone() for t in tensors])
        fresh = nn.Sequential(nn.Linear(128, 256), nn.BatchNorm1d(256))
        fresh.load_state_dict(again["model"])
        for a, b in zip(model.state_dict().values(), fresh.state_dict().values()):
            self.assertTrue(torch.equal(a, b))
        fresh_opt = torch.optim.Adam(fresh.parameters())
        fresh_opt.load_state_dict(again["optimizer"])
        self.assertTrue(torch.equal(fresh_opt.state[fresh[0].weight]["exp_avg_sq"],
                                    optimizer.state[model[0].weight]["exp_avg_sq"]))
        self.assertTrue(torch.equal(again["pair"][0], state["pair"][0]))
        self.assertEqual(again["pair"][1], 3)
        self.assertEqual(again["rng"][0], "MT19937")
        self.assertTrue(torch.equal(again["sparse"].to_dense(), torch.ones(20000)))

    def test_tree_reaches_every_member_once(self):
        for n in range(1, 12):
            members = [0] + list(range(5, 5 + n - 1))
            received = {0}
            parents = {}
            for rank in members:
                parent, children = handover._tree(members, rank)
                parents[rank] = parent
                for child in children:
                    self.assertEqual(handover._tree(members, child)[0], rank)
            self.assertIsNone(parents[0])
            for rank in members[1:]:
                chain, r = [], rank
                while r is not None:  # every member's chain of parents ends at the root
                    chain.append(r)
                    r = parents[r]
                    self.assertLess(len(chain), n + 1)
                received.update(chain)
            self.assertEqual(received, set(members))


if __name__ == "__main__":
    unittest.main()
