#ifndef CCRYPTO_SHIM_H
#define CCRYPTO_SHIM_H

#include <openssl/evp.h>

#endif
