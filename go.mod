module github.com/svc-dev/svc

go 1.26.8
