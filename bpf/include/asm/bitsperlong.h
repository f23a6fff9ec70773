/* See types.h beside this file. */
#include <asm-generic/bitsperlong.h>
