#pragma once
#include <stddef.h>
#include <stdint.h>

/// One page-aligned range of a loaded object that `smw_unmap_library_pages` may unmap.
typedef struct {
    uintptr_t start;
    uintptr_t end;  /* exclusive */
} smw_range;

/// The ranges of one loaded object (its program headers, as `dl_iterate_phdr` gives them) whose
/// pages can be unmapped without losing anything: the segments the dynamic linker mapped
/// read-only (code and constants; not a writable segment, so not its RELRO part either), of an
/// object without text relocations. Their pages are clean copies of the file, read back on the
/// next touch; only the pages wholly inside such a segment are given. `base` is the object's load
/// bias, `page` the page size. Writes at most `capacity` ranges to `out` and returns how many
/// there are (0 for an object with text relocations).
size_t smw_read_only_segments(uintptr_t base, const void *phdrs, size_t count, size_t page,
                              smw_range *out, size_t capacity);

/// Unmaps this process's pages of the loaded libraries' read-only segments (`MADV_DONTNEED`; the
/// first 16 of an object), the executable's included, except the vDSO: what nothing runs any
/// more is no longer counted against the process, and what is still used is mapped again from
/// the page cache on its next touch. Holds the dynamic linker's list lock meanwhile
/// (`dl_iterate_phdr`), so no object is unloaded under it. Returns the resident set it took away
/// in KiB (from /proc/self/statm; 0 if that cannot be read), or -1 when the kernel refused every
/// range.
long smw_unmap_library_pages(void);

/// The user message (`WebKitUserMessage`) with which the wrapper asks a web process to unmap its
/// library pages, through its web process extension (WebExtension/web_extension.c); the reply
/// has the same name and an int64 parameter, the KiB it took away (0 when that process already
/// did it).
#define SMW_UNMAP_MESSAGE "smartico-wrapper.unmap-library-pages"
