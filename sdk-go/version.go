// The SDK's name and version as sent in User-Agent and in every batch's "sdk" field.
package headwater

import (
	"runtime"
	"strings"
)

const (
	// SDKName is the name sent in User-Agent and in the batch's sdk.name.
	SDKName = "headwater-go"
	// Version is this SDK's version.
	Version = "0.1.0"
)

// UserAgent is "headwater-go/<version> (go/<runtime version>)".
var UserAgent = SDKName + "/" + Version + " (go/" + strings.TrimPrefix(runtime.Version(), "go") + ")"
