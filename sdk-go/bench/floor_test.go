// The benchmark's floor: building the same events without sending them (what every SDK's figure includes).
package bench

import "testing"

var sinkHole map[string]any

func BenchmarkFloorBuildEvent(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sinkHole = properties(i)
	}
}
