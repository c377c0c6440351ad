#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Transport

/// The machine's identifier, from `/etc/machine-id` or `/var/lib/dbus/machine-id`: only ever the
/// input of a hash (``DeviceFingerprint``), never sent or logged. A machine without one gets a
/// random one that the store keeps in `state_dir`.
public enum MachineID {
    public static let defaultPaths = ["/etc/machine-id", "/var/lib/dbus/machine-id"]

    /// The first non-empty first line of `paths`, trimmed; nil when none is readable.
    /// A blocking file read: call it at start-up, not on the cooperative pool.
    public static func read(paths: [String] = MachineID.defaultPaths) -> String? {
        for path in paths {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            guard let bytes = readBytes(fd, limit: 4096), let text = String(validating: bytes, as: UTF8.self) else { continue }
            let firstLine = text.split(whereSeparator: \.isNewline).first.map { $0.trimmingBlanks() } ?? ""
            if !firstLine.isEmpty { return firstLine }
        }
        return nil
    }
}

/// The `ua.fp` used when `client.fp` is null: the first 4 bytes, big-endian, of
/// SHA-256("smarticod-fp-v1" 0x00 machineID 0x00 labelKey) as an Int32. Stable for a machine and
/// key; unrelated across keys (operators), so it links no device across labels and does not reveal the machine id.
public enum DeviceFingerprint {
    public static func derive(machineID: String, labelKey: Secret) -> Int32 {
        let digest = Digest.sha256(Array("smarticod-fp-v1".utf8) + [0] + Array(machineID.utf8) + [0] + Array(labelKey.exposedValue.utf8))
        return Int32(bitPattern: UInt32(digest[0]) << 24 | UInt32(digest[1]) << 16 | UInt32(digest[2]) << 8 | UInt32(digest[3]))
    }
}
