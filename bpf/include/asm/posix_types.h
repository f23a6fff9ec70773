/* See types.h beside this file. */
#include <asm-generic/posix_types.h>
