/* The BPF target has no multiarch include directory: <linux/types.h> finds its
 * <asm/...> headers here, the generic ones (BPF is a 64-bit target; clang
 * defines __SIZEOF_LONG__, from which asm-generic derives __BITS_PER_LONG). */
#include <asm-generic/types.h>
