package database

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// listenRetry is how long Listen waits before it reconnects.
const listenRetry = time.Second

// Listen receives PostgreSQL's notifications on channels (LISTEN), on a
// connection of its own to url, and calls fn with each notification's
// channel and payload, until ctx ends. Whenever it has (re)connected it
// calls fn(channel, "") for every channel, since notifications sent while
// it was away are lost: the callee re-reads what the channel announces.
// A lost connection is reported to failed and retried every listenRetry.
func Listen(ctx context.Context, url string, channels []string, fn func(channel, payload string), failed func(error)) {
	for ctx.Err() == nil {
		err := listenOnce(ctx, url, channels, fn)
		if ctx.Err() != nil {
			return
		}
		failed(err)
		select {
		case <-ctx.Done():
		case <-time.After(listenRetry):
		}
	}
}

// listenOnce connects, listens and delivers until the connection fails.
func listenOnce(ctx context.Context, url string, channels []string, fn func(channel, payload string)) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	for _, ch := range channels {
		fn(ch, "")
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Channel, n.Payload)
	}
}
