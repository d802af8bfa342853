"""The Headwater conformance runner: runs the vectors of `sdk-specs/vectors/` against SDK drivers and the gateway."""
