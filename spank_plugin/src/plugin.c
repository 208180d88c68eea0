/*
 * elastic.so: the SPANK plugin of elastic-slurm. This file holds only the exported SPANK
 * entry points; each one hands over to the C++ side (boundary.cpp), which catches every
 * exception and turns it into -1 with a prefixed error message.
 */
#include <slurm/spank.h>

#include "boundary.h"

SPANK_PLUGIN(elastic, 1)

int slurm_spank_init(spank_t sp, int ac, char **av) { return elastic_spank_init(sp, ac, av); }

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) { return elastic_spank_init_post_opt(sp, ac, av); }

int slurm_spank_task_init(spank_t sp, int ac, char **av) { return elastic_spank_task_init(sp, ac, av); }

int slurm_spank_exit(spank_t sp, int ac, char **av) { return elastic_spank_exit(sp, ac, av); }
