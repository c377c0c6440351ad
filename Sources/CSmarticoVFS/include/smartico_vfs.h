// A thin SQLite VFS over the default one that gathers the WAL's writes (docs/store.md,
// "Gathered WAL writes").
#ifndef SMARTICO_VFS_H
#define SMARTICO_VFS_H

/// The name to pass to sqlite3_open_v2.
#define SMARTICO_VFS_NAME "smartico-gather"

/// Registers the VFS (not as the default); safe to call more than once and from any thread.
/// Returns SQLITE_OK, or SQLite's error code.
int smartico_vfs_register(void);

#endif
