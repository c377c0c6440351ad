#if canImport(Glibc)
import Glibc
#endif
import CWorkingSet
import Testing

@Suite("CWorkingSet: the library pages the wrapper unmaps once something is on screen")
struct WorkingSetTests {
    let page = 0x1000

    func header(_ type: UInt32, flags: UInt32, vaddr: Int, size: Int) -> Elf64_Phdr {
        Elf64_Phdr(p_type: type, p_flags: flags, p_offset: 0, p_vaddr: UInt64(vaddr), p_paddr: UInt64(vaddr),
                   p_filesz: UInt64(size), p_memsz: UInt64(size), p_align: UInt64(page))
    }

    func segments(_ headers: [Elf64_Phdr], base: UInt = 0x7f00_0000_0000, capacity: Int = 8) -> (count: Int, ranges: [smw_range]) {
        var out = [smw_range](repeating: smw_range(), count: capacity)
        let n = headers.withUnsafeBufferPointer { h in
            smw_read_only_segments(base, h.baseAddress, h.count, page, &out, capacity)
        }
        return (n, Array(out.prefix(min(n, capacity))))
    }

    @Test("the read-only loads (code, constants) are chosen, whole pages only; writable ones and other headers are not")
    func choice() {
        let base: UInt = 0x7f00_0000_0000
        let (n, ranges) = segments([
            header(UInt32(PT_PHDR), flags: UInt32(PF_R), vaddr: 0x40, size: 0x2a0),
            header(UInt32(PT_LOAD), flags: UInt32(PF_R), vaddr: 0, size: 0x2800),             // headers, constants
            header(UInt32(PT_LOAD), flags: UInt32(PF_R | PF_X), vaddr: 0x3000, size: 0x5000),  // code
            header(UInt32(PT_LOAD), flags: UInt32(PF_R), vaddr: 0x8800, size: 0x800),         // inside one page: none
            header(UInt32(PT_LOAD), flags: UInt32(PF_R | PF_W), vaddr: 0xa000, size: 0x3000), // data and RELRO
            header(UInt32(PT_GNU_RELRO), flags: UInt32(PF_R), vaddr: 0xa000, size: 0x1000),
            header(UInt32(PT_LOAD), flags: UInt32(PF_R), vaddr: 0xd800, size: 0x2000),        // starts mid-page
        ], base: base)
        #expect(n == 3)
        #expect(ranges.map { $0.start - base } == [0, 0x3000, 0xe000])
        #expect(ranges.map { $0.end - base } == [0x2000, 0x8000, 0xf000])
    }

    @Test("an object with text relocations gives nothing (its code pages were written)")
    func textRelocations() {
        for dynamic in [[Elf64_Dyn(d_tag: Int64(DT_TEXTREL), d_un: .init(d_val: 0))],
                        [Elf64_Dyn(d_tag: Int64(DT_FLAGS), d_un: .init(d_val: UInt64(DF_TEXTREL | DF_BIND_NOW)))]] {
            let entries = dynamic + [Elf64_Dyn(d_tag: Int64(DT_NULL), d_un: .init(d_val: 0))]
            entries.withUnsafeBufferPointer { d in
                let dynamicAt = 0x9000
                let base = UInt(bitPattern: d.baseAddress) - UInt(dynamicAt)
                let (n, _) = segments([
                    header(UInt32(PT_LOAD), flags: UInt32(PF_R | PF_X), vaddr: 0, size: 0x8000),
                    header(UInt32(PT_DYNAMIC), flags: UInt32(PF_R | PF_W), vaddr: dynamicAt, size: 0x100),
                ], base: base)
                #expect(n == 0)
            }
        }
        // The same object without them.
        let plain = [Elf64_Dyn(d_tag: Int64(DT_FLAGS), d_un: .init(d_val: UInt64(DF_BIND_NOW))),
                     Elf64_Dyn(d_tag: Int64(DT_NULL), d_un: .init(d_val: 0))]
        plain.withUnsafeBufferPointer { d in
            let base = UInt(bitPattern: d.baseAddress) - 0x9000
            let (n, _) = segments([
                header(UInt32(PT_LOAD), flags: UInt32(PF_R | PF_X), vaddr: 0, size: 0x8000),
                header(UInt32(PT_DYNAMIC), flags: UInt32(PF_R | PF_W), vaddr: 0x9000, size: 0x100),
            ], base: base)
            #expect(n == 1)
        }
    }

    @Test("more ranges than room: the count says how many, only the room is written")
    func capacity() {
        let headers = (0..<5).map { header(UInt32(PT_LOAD), flags: UInt32(PF_R), vaddr: $0 * 0x2000, size: 0x1000) }
        let (n, ranges) = segments(headers, capacity: 2)
        #expect(n == 5)
        #expect(ranges.count == 2)
    }

    @Test("unmapping this process's library pages takes resident memory away, and what is read again is intact")
    func unmapsAndReadsBack() {
        // A constant of this test binary and a function of the C library, before and after.
        let text = "the pages of a library are clean copies of its file"
        let before = text.utf8.reduce(0) { $0 &+ Int($1) }
        let length = strlen("a C string of this binary's constants")
        let kib = smw_unmap_library_pages()
        #expect(kib > 0)
        #expect(text.utf8.reduce(0) { $0 &+ Int($1) } == before)
        #expect(strlen("a C string of this binary's constants") == length)
    }
}
