module github.com/headwater-dev/headwater/sdk-go/bench

go 1.22

require (
	github.com/headwater-dev/headwater/sdk-go v0.0.0
	github.com/klauspost/compress v1.17.11
	github.com/posthog/posthog-go v1.5.2
	github.com/segmentio/analytics-go/v3 v3.3.0
)

require (
	github.com/bmizerany/assert v0.0.0-20160611221934-b7ed37b82869 // indirect
	github.com/google/uuid v1.3.0 // indirect
	github.com/kr/pretty v0.3.1 // indirect
	github.com/segmentio/backo-go v1.0.0 // indirect
)

replace github.com/headwater-dev/headwater/sdk-go => ../
