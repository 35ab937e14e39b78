package opa

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/svc-dev/svc/engine"
)

// TestServerBatchMatchesEval decides the whole parity table in one batch
// query of the supervised server, in the bundled pack and in packs whose
// data fails its checks: every verdict equals the one `opa eval` gives for
// the same input alone. (A batch checks the pack's data once for all its
// decisions, data.svc.policy.data_valid; a pack with broken data must still
// deny each of them as a single query would.)
func TestServerBatchMatchesEval(t *testing.T) {
	opa := opaTestBin(t)
	packs := map[string]string{"bundled": bundledPack(t), "broken thresholds": brokenThresholdsPack(t),
		"broken tables": brokenTablesPack(t)}
	for name, dir := range packs {
		t.Run(name, func(t *testing.T) {
			server := startOPAServer(t, opa, dir)
			waitUp(t, server)
			eval := NewEvalEvaluator(opa, dir, 10*time.Second)
			cases := parityCases()
			inputs := make([]json.RawMessage, 0, 2*len(cases))
			for range 2 { // twice: each evaluation sees only its own input
				for _, c := range cases {
					inputs = append(inputs, c.input)
				}
			}
			results, err := server.rest.evaluateBatch(t.Context(), inputs)
			require.NoError(t, err)
			require.Len(t, results, len(inputs))
			for i, r := range results {
				c := cases[i%len(cases)]
				want, err := eval.Evaluate(t.Context(), c.input)
				require.NoError(t, err, c.name)
				require.NoError(t, r.err, c.name)
				assert.Equal(t, want, r.verdict, c.name)
			}
		})
	}
}

// builtinErrorPack is a policy whose evaluation fails (strict built-in
// errors) when input.n is not numeric, and is undefined when input.skip.
func builtinErrorPack(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	policy := `package svc.policy

decision := {"decision": "allow", "rule": "test/n", "reason": sprintf("n=%v", [to_number(input.n)])} if {
	not input.skip
}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.rego"), []byte(policy), 0o600))
	return dir
}

// TestServerBatchIsolatesFaults: an input whose evaluation fails, or whose
// decision is undefined, fails only its own decision; the others of the
// batch are decided as they would be alone.
func TestServerBatchIsolatesFaults(t *testing.T) {
	server := startOPAServer(t, opaTestBin(t), builtinErrorPack(t))
	waitUp(t, server)
	inputs := []json.RawMessage{
		json.RawMessage(`{"n": "1"}`),
		json.RawMessage(`{"n": "not a number"}`),
		json.RawMessage(`{"n": "3", "skip": true}`),
		json.RawMessage(`{"n": 4}`),
	}
	results := server.evaluate(t.Context(), inputs)
	require.Len(t, results, len(inputs))
	assert.NoError(t, results[0].err)
	assert.Equal(t, "n=1", results[0].verdict.Reason)
	assert.ErrorContains(t, results[1].err, "to_number")
	assert.ErrorIs(t, results[2].err, errPolicyUndefined)
	assert.NoError(t, results[3].err)
	assert.Equal(t, "n=4", results[3].verdict.Reason)

	t.Run("without the faulty input the batch is one query", func(t *testing.T) {
		results, err := server.rest.evaluateBatch(t.Context(), []json.RawMessage{inputs[0], inputs[2], inputs[3]})
		require.NoError(t, err)
		assert.Equal(t, "n=1", results[0].verdict.Reason)
		assert.ErrorIs(t, results[1].err, errPolicyUndefined)
		assert.Equal(t, "n=4", results[2].verdict.Reason)
	})
}

// TestServerBatchDown: while the server is down, a batch fails whole, at
// once.
func TestServerBatchDown(t *testing.T) {
	server := startOPAServer(t, opaTestBin(t), bundledPack(t))
	waitUp(t, server)
	require.NoError(t, server.Close())
	start := time.Now()
	results := server.evaluate(t.Context(), []json.RawMessage{opaInput(nil), opaInput(nil)})
	for _, r := range results {
		assert.ErrorIs(t, r.err, errOPADown)
	}
	assert.Less(t, time.Since(start), 3*time.Second, "at once, not after a timeout")
}

// recordingSender answers each input with a verdict naming it, after
// release is closed, and records the size of every batch.
type recordingSender struct {
	release chan struct{}
	mu      sync.Mutex
	sizes   []int
}

func (s *recordingSender) send(_ context.Context, inputs []json.RawMessage) []batchResult {
	<-s.release
	s.mu.Lock()
	s.sizes = append(s.sizes, len(inputs))
	s.mu.Unlock()
	out := make([]batchResult, len(inputs))
	for i, in := range inputs {
		if string(in) == `"fail"` {
			out[i].err = errors.New("failed")
			continue
		}
		out[i].verdict = engine.Verdict{Decision: engine.Allow, Rule: "test/echo", Reason: string(in)}
	}
	return out
}

// TestBatcher: a lone caller is sent at once and alone; callers arriving
// while every slot is busy are sent together (at most max per batch), and
// each gets the result of its own input.
func TestBatcher(t *testing.T) {
	t.Run("lone caller", func(t *testing.T) {
		s := &recordingSender{release: make(chan struct{})}
		close(s.release)
		b := newBatcher(s.send, 2, 4, time.Minute)
		v, err := b.Evaluate(t.Context(), json.RawMessage(`"a"`))
		require.NoError(t, err)
		assert.Equal(t, `"a"`, v.Reason)
		_, err = b.Evaluate(t.Context(), json.RawMessage(`"fail"`))
		assert.EqualError(t, err, "failed")
		assert.Equal(t, []int{1, 1}, s.sizes)
	})
	t.Run("busy slots batch the queue", func(t *testing.T) {
		s := &recordingSender{release: make(chan struct{})}
		b := newBatcher(s.send, 1, 4, time.Minute)
		const callers = 9
		var wg sync.WaitGroup
		got := make([]string, callers)
		for i := range callers {
			wg.Go(func() {
				v, err := b.Evaluate(t.Context(), json.RawMessage(strconv.Quote(strconv.Itoa(i))))
				assert.NoError(t, err)
				got[i] = v.Reason
			})
			if i == 0 { // the first caller takes the only slot and blocks in send
				require.Eventually(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.running == 1 },
					5*time.Second, time.Millisecond)
			}
		}
		require.Eventually(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == callers-1 },
			5*time.Second, time.Millisecond)
		close(s.release)
		wg.Wait()
		for i, r := range got {
			assert.Equal(t, strconv.Quote(strconv.Itoa(i)), r)
		}
		assert.Equal(t, []int{1, 4, 4}, s.sizes)
		assert.Equal(t, 0, b.running, "the slot is freed once the queue is empty")
		assert.Empty(t, b.queue)
	})
	t.Run("many callers, every slot handed on", func(t *testing.T) {
		s := &recordingSender{release: make(chan struct{})}
		close(s.release)
		b := newBatcher(s.send, 2, 4, time.Minute)
		done := make(chan struct{})
		go func() {
			defer close(done)
			var wg sync.WaitGroup
			for g := range 32 {
				wg.Go(func() {
					for i := range 200 {
						in := strconv.Quote(strconv.Itoa(g*1000 + i))
						v, err := b.Evaluate(t.Context(), json.RawMessage(in))
						if !assert.NoError(t, err) || !assert.Equal(t, in, v.Reason) {
							return
						}
					}
				})
			}
			wg.Wait()
		}()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("callers are stuck: a slot was lost or a signal blocked")
		}
		total := 0
		for _, n := range s.sizes {
			assert.LessOrEqual(t, n, 4)
			total += n
		}
		assert.Equal(t, 32*200, total)
		assert.Equal(t, 0, b.running)
	})
}

// TestBatcherDeadline: a call gets its verdict within the batcher's
// timeout of its arrival, whether it waits in the queue, leads a batch or
// rides in one, and a call that gives up loses no slot.
func TestBatcherDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	within := func(t *testing.T, start time.Time, err error) {
		t.Helper()
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(start), timeout+3*time.Second, "the call outlived its timeout") // stalled: never, but for its timeout
	}
	t.Run("queued and leading callers", func(t *testing.T) {
		s := &stallingSender{release: make(chan struct{})}
		b := newBatcher(s.send, 1, 4, timeout)
		start := time.Now()
		errs := make(chan error, 2)
		for range 2 { // the first leads and stalls, the second waits in the queue
			go func() { _, err := b.Evaluate(t.Context(), json.RawMessage(`"x"`)); errs <- err }()
		}
		for range 2 {
			within(t, start, <-errs)
		}
		assertIdle(t, b)
		close(s.release)
		v, err := b.Evaluate(t.Context(), json.RawMessage(`"after"`))
		require.NoError(t, err, "the slot was handed on")
		assert.Equal(t, `"after"`, v.Reason)
	})
	t.Run("a member of a batch in flight", func(t *testing.T) {
		// The first query returns after 100 ms; the batch that follows it
		// overruns its deadline, as a sender that ignored it would.
		s := &stallingSender{release: make(chan struct{}), firstAfter: 100 * time.Millisecond, ignoreCtx: true}
		b := newBatcher(s.send, 1, 4, timeout)
		first := make(chan error, 1)
		go func() { _, err := b.Evaluate(t.Context(), json.RawMessage(`"first"`)); first <- err }()
		require.Eventually(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.running == 1 }, 5*time.Second, time.Millisecond)
		start := time.Now()
		errs := make(chan error, 2)
		for range 2 {
			go func() { _, err := b.Evaluate(t.Context(), json.RawMessage(`"x"`)); errs <- err }()
		}
		require.NoError(t, <-first)
		within(t, start, <-errs) // one leaves at its deadline while the query is stuck
		close(s.release)
		// The other is the leader. When its deadline is the batch's latest it
		// sent the query itself and gets the result its sender returned;
		// otherwise the query went out on a goroutine of its own and the
		// leader left at its deadline too. Which it is depends on which of
		// the two arrived first, by nanoseconds.
		if err := <-errs; err != nil {
			within(t, start, err)
		}
		assertIdle(t, b)
	})
}

// TestBatcherCallerDeadline: a caller whose context has a deadline sooner
// than the batcher's timeout (the decision's own, which its wait for its
// session used up in part) gets its answer by that deadline, leading or
// queued.
func TestBatcherCallerDeadline(t *testing.T) {
	const soon = 200 * time.Millisecond
	s := &stallingSender{release: make(chan struct{})}
	b := newBatcher(s.send, 1, 4, time.Minute)
	start := time.Now()
	errs := make(chan error, 2)
	for range 2 { // the first leads and stalls, the second waits in the queue
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), soon)
			defer cancel()
			_, err := b.Evaluate(ctx, json.RawMessage(`"x"`))
			errs <- err
		}()
	}
	for range 2 {
		assert.ErrorIs(t, <-errs, context.DeadlineExceeded)
		assert.Less(t, time.Since(start), soon+time.Second, "the call outlived its context's deadline")
	}
	assertIdle(t, b)
	close(s.release)
}

// TestBatcherLeaderNearItsDeadline: a leader with little time left (its
// decision waited for its session) does not cut short the followers of its
// batch: the query is bounded by their later deadline, and the leader
// leaves at its own.
func TestBatcherLeaderNearItsDeadline(t *testing.T) {
	s := &stallingSender{release: make(chan struct{}), firstAfter: 100 * time.Millisecond}
	b := newBatcher(s.send, 1, 8, time.Minute)
	first := make(chan error, 1)
	go func() { _, err := b.Evaluate(t.Context(), json.RawMessage(`"first"`)); first <- err }()
	require.Eventually(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.running == 1 }, 5*time.Second, time.Millisecond)
	leader := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
		defer cancel()
		_, err := b.Evaluate(ctx, json.RawMessage(`"leader"`))
		leader <- err
	}()
	require.Eventually(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 1 }, 5*time.Second, time.Millisecond)
	const followers = 5
	results := make(chan error, followers)
	for range followers {
		go func() { _, err := b.Evaluate(t.Context(), json.RawMessage(`"f"`)); results <- err }()
	}
	require.Eventually(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 1+followers }, 5*time.Second, time.Millisecond)
	require.NoError(t, <-first)
	start := time.Now()
	assert.ErrorIs(t, <-leader, context.DeadlineExceeded, "the leader leaves at its own deadline")
	assert.Less(t, time.Since(start), 3*time.Second, "not held by the batch, whose query is stalled")
	close(s.release) // the batch's query answers after the leader left
	for range followers {
		assert.NoError(t, <-results, "a follower with time left gets its verdict")
	}
	assertIdle(t, b)
}

// TestBatcherDeadlineUnderLoad: many callers with a timeout close to the
// sender's time, so that calls leave in every state (queued, in a batch,
// just handed the lead): every call returns, within its timeout or with its
// result, and no slot is lost.
func TestBatcherDeadlineUnderLoad(t *testing.T) {
	const timeout = 2 * time.Millisecond
	var sent atomic.Int64
	send := func(ctx context.Context, inputs []json.RawMessage) []batchResult {
		sent.Add(1)
		select {
		case <-time.After(time.Duration(sent.Load()%4) * time.Millisecond):
		case <-ctx.Done():
			return failAll(len(inputs), ctx.Err())
		}
		out := make([]batchResult, len(inputs))
		for i, in := range inputs {
			out[i].verdict = engine.Verdict{Decision: engine.Allow, Rule: "test/echo", Reason: string(in)}
		}
		return out
	}
	b := newBatcher(send, 2, 4, timeout)
	var answered, timedOut atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 100 {
				in := strconv.Quote(strconv.Itoa(g*1000 + i))
				v, err := b.Evaluate(t.Context(), json.RawMessage(in))
				switch {
				case err == nil:
					assert.Equal(t, in, v.Reason, "a result of another input")
					answered.Add(1)
				case errors.Is(err, context.DeadlineExceeded):
					timedOut.Add(1)
				default:
					t.Errorf("unexpected error: %v", err)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(3200), answered.Load()+timedOut.Load())
	assert.Positive(t, answered.Load())
	assert.Positive(t, timedOut.Load())
	assertIdle(t, b)
}

// TestBatcherLeave covers each state a call can be in when its time is up.
func TestBatcherLeave(t *testing.T) {
	result := batchSignal{result: batchResult{verdict: engine.Verdict{Decision: engine.Allow, Reason: "late"}}}
	for name, tc := range map[string]struct {
		queued      bool         // the call is still in the queue
		signal      *batchSignal // what is in its buffer
		others      int          // calls queued behind it
		wantErr     bool
		wantQueue   int
		wantRunning int
	}{
		"still queued":              {queued: true, others: 1, wantErr: true, wantQueue: 1, wantRunning: 1},
		"in a batch in flight":      {wantErr: true, wantRunning: 1},
		"its result just came":      {signal: &result, wantRunning: 1},
		"given the lead, none next": {signal: &batchSignal{lead: true}, wantErr: true, wantRunning: 0},
		"given the lead, one next":  {signal: &batchSignal{lead: true}, others: 1, wantErr: true, wantRunning: 1},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBatcher(nil, 1, 4, time.Second)
			b.running = 1
			c := &batchCall{done: make(chan batchSignal, 1)}
			if tc.queued {
				b.queue = append(b.queue, c)
			}
			if tc.signal != nil {
				c.done <- *tc.signal
			}
			var next []*batchCall
			for range tc.others {
				n := &batchCall{done: make(chan batchSignal, 1)}
				next = append(next, n)
				b.queue = append(b.queue, n)
			}
			v, err := b.leave(c)
			if tc.wantErr {
				assert.ErrorIs(t, err, context.DeadlineExceeded)
			} else {
				require.NoError(t, err)
				assert.Equal(t, "late", v.Reason)
			}
			assert.Equal(t, tc.wantRunning, b.running)
			assert.NotContains(t, b.queue, c)
			assert.Len(t, b.queue, tc.wantQueue)
			if tc.signal != nil && tc.signal.lead && tc.others > 0 {
				assert.Equal(t, batchSignal{lead: true}, <-next[0].done, "the lead passes to the next call")
			}
		})
	}
	t.Run("a leader whose time is up", func(t *testing.T) {
		b := newBatcher(nil, 1, 4, time.Second)
		b.running = 1
		r, ok := b.lead(t.Context(), &batchCall{done: make(chan batchSignal, 1), deadline: time.Now().Add(-time.Millisecond)})
		require.True(t, ok)
		assert.ErrorIs(t, r.err, context.DeadlineExceeded)
		assert.Equal(t, 0, b.running, "the slot is freed unused")
	})
}

func assertIdle(t *testing.T, b *batcher) {
	t.Helper()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.running == 0 && len(b.queue) == 0
	}, 5*time.Second, time.Millisecond, "every slot is freed and the queue is empty")
}

// stallingSender answers its first query after firstAfter and every later
// one once release is closed; unless ignoreCtx, a query also ends, failed,
// at its context's deadline.
type stallingSender struct {
	release    chan struct{}
	firstAfter time.Duration
	ignoreCtx  bool
	calls      atomic.Int32
}

func (s *stallingSender) send(ctx context.Context, inputs []json.RawMessage) []batchResult {
	if s.calls.Add(1) == 1 && s.firstAfter > 0 {
		time.Sleep(s.firstAfter)
	} else {
		done := ctx.Done()
		if s.ignoreCtx {
			done = nil
		}
		select {
		case <-s.release:
		case <-done:
			return failAll(len(inputs), ctx.Err())
		}
	}
	out := make([]batchResult, len(inputs))
	for i, in := range inputs {
		out[i].verdict = engine.Verdict{Decision: engine.Allow, Rule: "test/echo", Reason: string(in)}
	}
	return out
}

// TestOPAEnv: the opa processes svc starts collect garbage less often unless
// the operator chose a GOGC.
func TestOPAEnv(t *testing.T) {
	assert.Equal(t, []string{"PATH=/bin", "GOGC=" + opaGCPercent}, opaEnv([]string{"PATH=/bin"}))
	assert.Equal(t, []string{"GOGC=off", "PATH=/bin"}, opaEnv([]string{"GOGC=off", "PATH=/bin"}))
}

// TestEvaluateBatchExactMembers: a batch answer's members are read by their
// exact names. A result spelt another way or given twice, or a position
// given twice, fails the whole batch; a verdict spelt another way fails its
// own input; unrelated members are ignored.
func TestEvaluateBatchExactMembers(t *testing.T) {
	const frozen = `{"decision":"deny","rule":"svc.policy/frozen","reason":"frozen"}`
	const allow = `{"decision":"allow","rule":"r","reason":"x"}`
	tests := []struct {
		name  string
		body  string
		batch string    // error substring of the whole batch; "" means none
		want  [2]string // error substring of each input; "" means the frozen verdict
	}{
		{"exact", `{"result":{"0":` + frozen + `,"1":` + frozen + `}}`, "", [2]string{}},
		{"extra members", `{"metrics":{},"result":{"0":{"decision":"deny","rule":"svc.policy/frozen","reason":"frozen","Decisions":"allow"},"01":` + allow + `,"1":` + frozen + `,"2":` + allow + `}}`, "", [2]string{}},
		{"Result member", `{"Result":{"0":` + allow + `,"1":` + allow + `}}`, `"Result" spells "result" another way`, [2]string{}},
		{"folded result after result", `{"result":{"0":` + frozen + `,"1":` + frozen + `},"reſult":{"0":` + allow + `,"1":` + allow + `}}`, `"reſult" spells "result" another way`, [2]string{}},
		{"duplicate result", `{"result":{"0":` + frozen + `,"1":` + frozen + `},"result":{"0":` + allow + `,"1":` + allow + `}}`, `"result" appears twice`, [2]string{}},
		{"duplicate position", `{"result":{"0":` + frozen + `,"0":` + allow + `,"1":` + frozen + `}}`, "decision 0 appears twice", [2]string{}},
		{"folded decision after decision", `{"result":{"0":{"decision":"deny","deciſion":"allow","rule":"r","reason":"x"},"1":` + frozen + `}}`, "",
			[2]string{`"deciſion" spells "decision" another way`, ""}},
		{"case variants only", `{"result":{"0":{"Decision":"allow","RULE":"r","Reason":"x"}}}`, "",
			[2]string{`spells "decision" another way`, "policy decision is undefined"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev := fakeOPAServer(t, opaAnswer(200, tt.body))
			results, err := ev.evaluateBatch(t.Context(), []json.RawMessage{opaInput(nil), opaInput(nil)})
			if tt.batch != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.batch)
				assert.Nil(t, results)
				return
			}
			require.NoError(t, err)
			require.Len(t, results, 2)
			for i, want := range tt.want {
				if want == "" {
					require.NoError(t, results[i].err, "input %d", i)
					assert.Equal(t, engine.Verdict{Decision: engine.Deny, Rule: RuleFrozen, Reason: "frozen"}, results[i].verdict)
					continue
				}
				require.Error(t, results[i].err, "input %d", i)
				assert.Contains(t, results[i].err.Error(), want, "input %d", i)
				assert.Equal(t, engine.Verdict{}, results[i].verdict)
			}
		})
	}
}

// TestBatcherShortAnswerFailsTheBatch: a sender that returns fewer results
// than inputs (an evaluator bug) fails every call of the batch instead of
// panicking, on the leader's goroutine or its own.
func TestBatcherShortAnswerFailsTheBatch(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	send := func(ctx context.Context, inputs []json.RawMessage) []batchResult {
		if calls.Add(1) == 1 {
			<-release
		}
		return make([]batchResult, len(inputs)-1)
	}
	b := newBatcher(send, 1, 4, time.Minute)
	errs := make(chan error, 3)
	go func() { _, err := b.Evaluate(t.Context(), json.RawMessage(`"first"`)); errs <- err }()
	require.Eventually(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.running == 1 }, 5*time.Second, time.Millisecond)
	for range 2 {
		go func() { _, err := b.Evaluate(t.Context(), json.RawMessage(`"x"`)); errs <- err }()
	}
	require.Eventually(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) == 2 }, 5*time.Second, time.Millisecond)
	close(release)
	for range 3 {
		assert.ErrorContains(t, <-errs, "results for")
	}
	assertIdle(t, b)
}
