/* Chooses the socket an instance file is built with: custom_socket when the build defines
 * SM_PREFIX (the Makefile's prefixed libsm_<name>.a), malloc_socket otherwise (lib<name>.so).
 * One composition file thus yields both the drop-in and the prefixed allocator. */
#ifdef SM_PREFIX
#include "custom_socket.h"
#else
#include "malloc_socket.h"
#endif
