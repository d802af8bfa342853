// The language-neutral fixtures of sdk-specs/vectors/fixtures (split ids, Retry-After) checked against this SDK.
package headwater

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type fixture struct {
	ID      string `json:"id"`
	Fixture struct {
		Kind    string   `json:"kind"`
		Parent  string   `json:"parent"`
		Halves  []string `json:"halves"`
		Header  string   `json:"header"`
		Now     float64  `json:"now"`
		Seconds *float64 `json:"seconds"`
	} `json:"fixture"`
}

func loadFixtures(t *testing.T) []fixture {
	files, _ := filepath.Glob("../sdk-specs/vectors/fixtures/*.json")
	if len(files) == 0 {
		t.Skip("no sdk-specs/vectors/fixtures beside this module")
	}
	var all []fixture
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var some []fixture
		if err := json.Unmarshal(data, &some); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		all = append(all, some...)
	}
	return all
}

func TestSpecFixtures(t *testing.T) {
	checked := 0
	for _, f := range loadFixtures(t) {
		fx := f.Fixture
		switch fx.Kind {
		case "split_ids":
			for k, want := range fx.Halves {
				if got := splitBatchID(fx.Parent, k); got != want {
					t.Errorf("%s: half %d is %s, want %s", f.ID, k, got, want)
				}
			}
		case "retry_after":
			want := -1.0
			if fx.Seconds != nil {
				want = *fx.Seconds
			}
			if got := parseRetryAfter(fx.Header, time.Unix(int64(fx.Now), 0)); got != want {
				t.Errorf("%s: %v, want %v", f.ID, got, want)
			}
		default:
			continue
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no fixture of a known kind")
	}
}
