#ifndef PUSHRELAY_CPOSTGRES_SHIM_H
#define PUSHRELAY_CPOSTGRES_SHIM_H
#include <libpq-fe.h>
#endif
