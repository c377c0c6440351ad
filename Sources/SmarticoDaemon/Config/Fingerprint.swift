#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Transport

/// The machine's identifier, read from `/etc/machine-id` or `/var/lib/dbus/machine-id`.
///
/// It is only ever used as input to a hash (``DeviceFingerprint``); it is never sent or logged.
/// When neither file exists, the caller provides a value of its own (the store persists a
/// random one in `state_dir`), so everything that needs it takes it as a parameter.
public enum MachineID {
    /// Where the machine id is looked for, in order.
    public static let defaultPaths = ["/etc/machine-id", "/var/lib/dbus/machine-id"]

    /// The first non-empty first line of `paths`, trimmed; nil when none is readable.
    /// A blocking file read: call it at start-up, not on the cooperative pool.
    public static func read(paths: [String] = MachineID.defaultPaths) -> String? {
        for path in paths {
            guard let bytes = readPrefix(path: path, limit: 4096),
                  let text = String(validating: bytes, as: UTF8.self) else { continue }
            let firstLine = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            let trimmed = firstLine.trimmingBlanks()
            if !trimmed.isEmpty { return trimmed }
        }
        return nil
    }
}

/// The first `limit` bytes of the file at `path` (a machine id is 33 bytes); nil when it
/// cannot be opened or read.
private func readPrefix(path: String, limit: Int) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { _ = close(fd) }
    return readBytes(fd, limit: limit)
}

/// The `ua.fp` value used when `client.fp` is null: a stable signed 32-bit number derived
/// from the machine id and the label key.
///
/// `fp = Int32(bitPattern: first 4 bytes, big-endian, of SHA-256("smarticod-fp-v1" 0x00 machineID 0x00 labelKey))`.
/// The same machine and key always give the same value; another key (another operator) gives
/// an unrelated value, so the number cannot be used to link a device across labels, and the
/// machine id cannot be recovered from it.
public enum DeviceFingerprint {
    static let domainSeparator = "smarticod-fp-v1"

    public static func derive(machineID: String, labelKey: Secret) -> Int32 {
        var input = Array(domainSeparator.utf8)
        input.append(0)
        input.append(contentsOf: machineID.utf8)
        input.append(0)
        input.append(contentsOf: labelKey.exposedValue.utf8)
        let digest = Digest.sha256(input)
        let value = UInt32(digest[0]) << 24 | UInt32(digest[1]) << 16 | UInt32(digest[2]) << 8 | UInt32(digest[3])
        return Int32(bitPattern: value)
    }
}
