// Command pgcluster runs a throwaway PostgreSQL cluster (package
// database/pgtest) for scripts/bench: it prints the URLs of N empty
// databases (its argument, 1 by default), one a line, serves until it is
// signalled (SIGINT, SIGTERM), then stops the cluster and removes its
// files.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/svc-dev/svc/database/pgtest"
)

func main() {
	n := 1
	if len(os.Args) > 1 {
		var err error
		if n, err = strconv.Atoi(os.Args[1]); err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "usage: pgcluster [number of databases]")
			os.Exit(2)
		}
	}
	if err := run(n); err != nil {
		fmt.Fprintln(os.Stderr, "pgcluster:", err)
		os.Exit(1)
	}
}

func run(n int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := pgtest.Start()
	if err != nil {
		return err
	}
	defer c.Stop()
	for range n {
		url, err := c.CreateDatabase()
		if err != nil {
			return err
		}
		fmt.Println(url)
	}
	<-ctx.Done()
	return nil
}
