// SQLite's C API, used directly by the daemon's store (see docs/store.md).
#ifndef SMARTICO_CSQLITE_SHIM_H
#define SMARTICO_CSQLITE_SHIM_H
#include <sqlite3.h>
#endif
