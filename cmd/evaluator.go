package cmd

import (
	"context"
	"fmt"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/opa"
)

// checkedEvaluator is an evaluator that can check that it decides now, at
// start-up and for GET /readyz.
type checkedEvaluator interface {
	engine.Evaluator
	Check(ctx context.Context) error
}

// newEvaluator builds the policy evaluator of the configured mode and checks
// at start-up that it runs and that the policy compiles and decides:
//   - SVC_OPA_URL set: an OPA server svc does not manage, queried over REST;
//     it must answer and have package svc.policy loaded at start-up, and
//     while it is away later every decision is denied;
//   - SVC_OPA_MODE=server: an `opa run --server` svc starts and supervises;
//   - SVC_OPA_MODE=eval (default): one `opa eval` per decision, with
//     SVC_OPA_EVAL_SPARES processes started ahead of the decisions.
func (a *app) newEvaluator(ctx context.Context, policyDir string) (checkedEvaluator, error) {
	switch {
	case a.cfg.OPAURL != "":
		return a.externalEvaluator(ctx)
	case a.cfg.OPAMode == "server":
		return a.managedEvaluator(ctx, policyDir)
	}
	eval := opa.NewEvalEvaluator(a.cfg.OPABin, policyDir, a.cfg.OPATimeout).WithSpares(a.cfg.OPAEvalSpares)
	a.closers = append(a.closers, eval.Close)
	if err := eval.Check(ctx); err != nil {
		return nil, fmt.Errorf("policy engine check failed (SVC_OPA_BIN=%s, policy %s): %w", a.cfg.OPABin, policyDir, err)
	}
	a.log.Info().Str("opa_mode", "eval").Str("policy_dir", policyDir).Int("opa_eval_spares", a.cfg.OPAEvalSpares).
		Msg("policy engine ready")
	return eval, nil
}

// externalEvaluator queries the OPA server at SVC_OPA_URL.
func (a *app) externalEvaluator(ctx context.Context) (checkedEvaluator, error) {
	where := redactURL(a.cfg.OPAURL)
	eval, err := opa.NewRESTEvaluator(a.cfg.OPAURL, a.cfg.OPATimeout)
	if err != nil {
		return nil, fmt.Errorf("SVC_OPA_URL=%s: %w", where, err)
	}
	eval.WithBearerToken(a.cfg.OPAToken)
	eval.UseRootCAs(a.cfg.TLS.roots)
	a.closers = append(a.closers, eval.Close)
	if err := eval.Check(ctx); err != nil {
		return nil, fmt.Errorf("policy engine check failed (SVC_OPA_URL=%s): %w", where, err)
	}
	a.log.Info().Str("opa_mode", "external").Str("opa_url", where).Msg("policy engine ready")
	return eval, nil
}

// managedEvaluator starts and supervises `opa run --server` on policyDir,
// watching it for changes when it is the operator's SVC_POLICY_DIR.
func (a *app) managedEvaluator(ctx context.Context, policyDir string) (checkedEvaluator, error) {
	srv, err := opa.StartOPAServer(opa.OPAServerConfig{
		Bin: a.cfg.OPABin, PolicyDir: policyDir, Watch: a.cfg.PolicyDir != "",
		Timeout: a.cfg.OPATimeout, Logger: a.log,
	})
	if err != nil {
		return nil, fmt.Errorf("SVC_OPA_MODE=server: %w", err)
	}
	a.closers = append(a.closers, srv.Close)
	if err := srv.Check(ctx); err != nil {
		return nil, fmt.Errorf("policy engine check failed (SVC_OPA_MODE=server, SVC_OPA_BIN=%s, policy %s): %w",
			a.cfg.OPABin, policyDir, err)
	}
	a.log.Info().Str("opa_mode", "server").Str("policy_dir", policyDir).Msg("policy engine ready")
	return srv, nil
}
