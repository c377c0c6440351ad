import Foundation
import Testing
import SmarticoProtocol

/// Loads `Fixtures/<name>` from the test bundle.
func fixture(_ name: String) throws -> [UInt8] {
    let url = try #require(Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Fixtures"),
                           "fixture \(name) is missing")
    return Array(try Data(contentsOf: url))
}

func fixtureObject(_ name: String) throws -> JSONObject {
    let value = try JSONValue(parsing: try fixture(name))
    return try #require(value.objectValue, "fixture \(name) is not an object")
}

/// All fixture file names.
func allFixtureNames() throws -> [String] {
    let dir = try #require(Bundle.module.url(forResource: "Fixtures", withExtension: nil))
    return try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".json") }.sorted()
}

extension Array where Element == UInt8 {
    var text: String { String(decoding: self, as: UTF8.self) }
}

func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
