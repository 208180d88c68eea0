/*
 * release.c - give hosts back to the runtime from inside a job: a PMIx client
 * (any process launched by the DVM, e.g. rank 0 of the world) asks for
 * PMIX_ALLOC_RELEASE of the hosts named in argv[1] (comma-separated).
 * This is what "palloc --shrink -w HOSTS" sends from outside as a tool.
 */
#include <pmix.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_info_t info;
    pmix_info_t *results = NULL;
    size_t nresults = 0;
    pmix_status_t rc;

    if (argc < 2) {
        fprintf(stderr, "usage: %s HOST[,HOST...]\n", argv[0]);
        return 2;
    }
    if (PMIX_SUCCESS != (rc = PMIx_Init(&me, NULL, 0))) {
        fprintf(stderr, "PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    PMIX_INFO_LOAD(&info, PMIX_ALLOC_NODE_LIST, argv[1], PMIX_STRING);
    rc = PMIx_Allocation_request(PMIX_ALLOC_RELEASE, &info, 1, &results, &nresults);
    printf("RELEASE %s: %s (%zu result infos)\n", argv[1], PMIx_Error_string(rc), nresults);
    PMIX_INFO_DESTRUCT(&info);
    if (results)
        PMIX_INFO_FREE(results, nresults);
    PMIx_Finalize(NULL, 0);
    return rc == PMIX_SUCCESS ? 0 : 1;
}
