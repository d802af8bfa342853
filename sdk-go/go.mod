module github.com/headwater-dev/headwater/sdk-go

go 1.22

require github.com/klauspost/compress v1.17.11
