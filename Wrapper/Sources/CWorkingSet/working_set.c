#define _GNU_SOURCE
#include "working_set.h"
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

/* Whether an object's dynamic section asks for text relocations: its code pages were then written
   by the dynamic linker, and unmapping them would lose what it wrote. */
static int has_text_relocations(uintptr_t base, const ElfW(Phdr) *phdrs, size_t count) {
    for (size_t i = 0; i < count; i++) {
        if (phdrs[i].p_type != PT_DYNAMIC) continue;
        const ElfW(Dyn) *dyn = (const ElfW(Dyn) *)(base + phdrs[i].p_vaddr);
        for (; dyn->d_tag != DT_NULL; dyn++) {
            if (dyn->d_tag == DT_TEXTREL) return 1;
            if (dyn->d_tag == DT_FLAGS && (dyn->d_un.d_val & DF_TEXTREL)) return 1;
        }
    }
    return 0;
}

size_t smw_read_only_segments(uintptr_t base, const void *headers, size_t count, size_t page,
                              smw_range *out, size_t capacity) {
    const ElfW(Phdr) *phdrs = headers;
    if (page == 0 || has_text_relocations(base, phdrs, count)) return 0;
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        const ElfW(Phdr) *ph = &phdrs[i];
        if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W) || ph->p_memsz == 0) continue;
        /* Whole pages only: a page the segment shares with a neighbour (when the object was
           linked for pages smaller than this system's) belongs to the neighbour's mapping. */
        uintptr_t start = (base + ph->p_vaddr + page - 1) & ~(uintptr_t)(page - 1);
        uintptr_t end = (base + ph->p_vaddr + ph->p_memsz) & ~(uintptr_t)(page - 1);
        if (start >= end) continue;
        if (n < capacity) out[n] = (smw_range){start, end};
        n++;
    }
    return n;
}

struct walk {
    size_t page;
    uintptr_t vdso;
    size_t advised;
    size_t refused;
};

static int unmap_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct walk *walk = data;
    smw_range ranges[16];
    size_t n = smw_read_only_segments(info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum, walk->page,
                                      ranges, sizeof ranges / sizeof ranges[0]);
    if (n > sizeof ranges / sizeof ranges[0]) n = sizeof ranges / sizeof ranges[0];
    for (size_t i = 0; i < n; i++) {
        if (walk->vdso >= ranges[i].start && walk->vdso < ranges[i].end) return 0; /* the vDSO: no file */
    }
    for (size_t i = 0; i < n; i++) {
        if (madvise((void *)ranges[i].start, ranges[i].end - ranges[i].start, MADV_DONTNEED) == 0) {
            walk->advised++;
        } else {
            walk->refused++;
        }
    }
    return 0;
}

/* The resident set in pages (/proc/self/statm's second field), or -1. */
static long resident_pages(void) {
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char text[128];
    ssize_t got;
    do { got = read(fd, text, sizeof text - 1); } while (got < 0 && errno == EINTR);
    close(fd);
    if (got <= 0) return -1;
    text[got] = 0;
    long size = 0, resident = 0;
    if (sscanf(text, "%ld %ld", &size, &resident) != 2) return -1;
    return resident;
}

long smw_unmap_library_pages(void) {
    struct walk walk = {(size_t)sysconf(_SC_PAGESIZE), (uintptr_t)getauxval(AT_SYSINFO_EHDR), 0, 0};
    long before = resident_pages();
    dl_iterate_phdr(unmap_object, &walk);
    long after = resident_pages();
    if (walk.advised == 0 && walk.refused > 0) return -1;
    if (before < 0 || after < 0 || after > before) return 0;
    return (before - after) * (long)(walk.page / 1024);
}
