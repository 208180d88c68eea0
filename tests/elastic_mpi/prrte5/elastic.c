/*
 * elastic.c - grow (and shrink) an MPI world by letting separately launched
 * groups join it, or by spawning onto hosts that are added to the runtime.
 *
 * Roles (argv[1]):
 *   world JOINS        Initial world. Rank 0 opens a port and publishes it as
 *                      SERVICE. The (growing) world then accepts JOINS groups
 *                      one after another. After each join the merged
 *                      communicator runs an allreduce that must equal its size.
 *   group stay|leave   A joining group: looks the port up, connects, merges,
 *                      checks the allreduce. "leave": disconnects at once and
 *                      exits (the host it ran on can then be given back).
 *                      "stay": stays a member and takes part in later joins.
 *   spawner HOST...    Spawns one process per HOST, one after another, with
 *                      info key ADD_HOST_KEY (default "PMIX_ADD_HOST") set to
 *                      HOST, i.e. asks the runtime to add HOST first. Each
 *                      child merges, checks the allreduce, then disconnects.
 *   child              The process started by "spawner".
 *   check              Plain allreduce over MPI_COMM_WORLD (baseline).
 *
 * With LINGER=S in the environment the final world keeps running allreduces
 * for S more seconds (used to take a host away under a running world).
 *
 * Every successful check prints a line starting with "OK", with the wall clock
 * time (seconds since the epoch) and the host name, so a driver can time it.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SERVICE "elastic-svc"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char host[256];

/* The merged communicator must see every member: sum of ones == size. */
static int check(MPI_Comm merged, const char *what)
{
    int size, rank, one = 1, sum = 0;
    MPI_Comm_size(merged, &size);
    MPI_Comm_rank(merged, &rank);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged);
    if (sum != size) {
        printf("FAIL %s host=%s rank=%d size=%d sum=%d\n", what, host, rank, size, sum);
        fflush(stdout);
        return 1;
    }
    if (rank == 0 || strcmp(what, "join") == 0)
        printf("OK %s t=%.6f host=%s rank=%d size=%d\n", what, now(), host, rank, size);
    fflush(stdout);
    return 0;
}

/*
 * Member loop: accept `remaining` further groups on `cur`. After each merge the
 * world tells the group how many joins remain (bcast from rank 0) and the group
 * says whether it stays (bcast from the group's first rank).
 */
static void serve(MPI_Comm cur, const char *port, int remaining)
{
    while (remaining > 0) {
        MPI_Comm inter, merged;
        int cursize, leave;
        MPI_Comm_size(cur, &cursize);
        MPI_Comm_accept(port, MPI_INFO_NULL, 0, cur, &inter);
        MPI_Intercomm_merge(inter, 0, &merged);  /* old members first */
        check(merged, "accept");
        remaining--;
        MPI_Bcast(&remaining, 1, MPI_INT, 0, merged);
        MPI_Bcast(&leave, 1, MPI_INT, cursize, merged);
        if (leave) {
            MPI_Comm_free(&merged);
            MPI_Comm_disconnect(&inter);   /* the group is gone again */
        } else {
            cur = merged;                  /* the group is now a member */
        }
    }
    /* LINGER=S: keep the final world busy with allreduces for S seconds, so a
     * host can be taken away while members still run on it. */
    if (getenv("LINGER")) {
        double end = now() + atof(getenv("LINGER"));
        int rank, go = 1;
        MPI_Comm_rank(cur, &rank);
        while (go) {
            check(cur, "linger");
            usleep(500000);
            go = now() < end;
            MPI_Bcast(&go, 1, MPI_INT, 0, cur);  /* rank 0 decides for all */
        }
    }
}

int main(int argc, char **argv)
{
    char port[MPI_MAX_PORT_NAME] = "";
    int rank;

    gethostname(host, sizeof host);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: %s world N | group stay|leave | spawner HOST... | child\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    if (strcmp(argv[1], "world") == 0) {
        int joins = argc > 2 ? atoi(argv[2]) : 1;
        if (rank == 0) {
            MPI_Open_port(MPI_INFO_NULL, port);
            MPI_Publish_name(SERVICE, MPI_INFO_NULL, port);
            printf("READY t=%.6f host=%s port published\n", now(), host);
        }
        serve(MPI_COMM_WORLD, port, joins);
        if (rank == 0) {
            MPI_Unpublish_name(SERVICE, MPI_INFO_NULL, port);
            MPI_Close_port(port);
            printf("DONE world host=%s\n", host);
        }
    } else if (strcmp(argv[1], "group") == 0) {
        int leave = argc > 2 && strcmp(argv[2], "leave") == 0;
        int remaining;
        MPI_Comm inter, merged;
        MPI_Lookup_name(SERVICE, MPI_INFO_NULL, port);
        MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
        MPI_Intercomm_merge(inter, 1, &merged);  /* newcomers last */
        check(merged, "join");
        MPI_Bcast(&remaining, 1, MPI_INT, 0, merged);
        {
            int cursize, lv = leave;  /* our first rank follows the old members */
            MPI_Comm_remote_size(inter, &cursize);
            MPI_Bcast(&lv, 1, MPI_INT, cursize, merged);
        }
        if (leave) {
            MPI_Comm_free(&merged);
            MPI_Comm_disconnect(&inter);
            printf("LEFT t=%.6f host=%s\n", now(), host);
        } else {
            serve(merged, port, remaining);
        }
    } else if (strcmp(argv[1], "spawner") == 0) {
        const char *key = getenv("ADD_HOST_KEY") ? getenv("ADD_HOST_KEY") : "PMIX_ADD_HOST";
        for (int i = 2; i < argc; i++) {
            MPI_Info info;
            MPI_Comm inter, merged;
            char *cargv[] = {"child", NULL};
            double t0 = now();
            MPI_Info_create(&info);
            MPI_Info_set(info, key, argv[i]);           /* e.g. "nodeB:1" */
            {
                char h[256];
                snprintf(h, sizeof h, "%s", argv[i]);
                char *c = strchr(h, ':');
                if (c) *c = 0;
                MPI_Info_set(info, "host", h);          /* place the child there */
            }
            MPI_Comm_spawn(argv[0], cargv, 1, info, 0, MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE);
            MPI_Info_free(&info);
            MPI_Intercomm_merge(inter, 0, &merged);
            check(merged, "spawn");
            if (rank == 0)
                printf("SPAWN %d onto %s took %.3f s\n", i - 1, argv[i], now() - t0);
            MPI_Comm_free(&merged);
            MPI_Comm_disconnect(&inter);
        }
    } else if (strcmp(argv[1], "check") == 0) {
        check(MPI_COMM_WORLD, "join");
    } else if (strcmp(argv[1], "child") == 0) {
        MPI_Comm parent, merged;
        MPI_Comm_get_parent(&parent);
        MPI_Intercomm_merge(parent, 1, &merged);
        check(merged, "join");
        MPI_Comm_free(&merged);
        MPI_Comm_disconnect(&parent);
    }
    MPI_Finalize();
    return 0;
}
