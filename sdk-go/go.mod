module github.com/headwater-dev/headwater-go

go 1.22

require github.com/klauspost/compress v1.17.11
