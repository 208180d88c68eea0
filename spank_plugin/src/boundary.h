/* The C boundary between the plugin's C entry points and its C++ modules. Every function
 * returns 0 or -1 (SPANK's convention) and never lets an exception escape. */
#ifndef ELASTIC_SPANK_BOUNDARY_H
#define ELASTIC_SPANK_BOUNDARY_H

#include <slurm/spank.h>

#ifdef __cplusplus
extern "C" {
#endif

int elastic_spank_init(spank_t sp, int ac, char **av);
int elastic_spank_init_post_opt(spank_t sp, int ac, char **av);
int elastic_spank_task_init(spank_t sp, int ac, char **av);
int elastic_spank_exit(spank_t sp, int ac, char **av);

#ifdef __cplusplus
}
#endif

#endif
