// Package inbox is the reviewers' web app of `svc serve`, under /ui/: a
// person signs in with their resolver token (SVC_RESOLVER_TOKENS), sees the
// pending holds, opens one, and approves or rejects it with an optional
// note; a history page lists the holds no longer pending.
//
// Pages are rendered on the server with html/template, from templates and
// assets embedded in the binary; approving needs no JavaScript, and the
// one script (static/app.js) only reloads a list when a hold arrives or
// leaves pending (server-sent events, GET /ui/events).
//
// The app holds no rules of its own: it lists holds with the store's
// listing (the cursors and filters of GET /v1/holds), and it asks the hold
// service (holds.Service) both whether the signed-in person may decide a
// hold (Vet: verification, state, four eyes, resolution policy) and to
// resolve it (Resolve), exactly as POST /v1/holds/{id}/resolve does, with
// the person's token as the credential.
//
// Sessions live in the process's memory: the cookie carries a random
// session id and its expiry, signed with a key drawn at start-up, and the
// token stays on the server. Every request of a session looks its token up
// in SVC_RESOLVER_TOKENS again, so a token removed from the file ends its
// sessions at their next request.
package inbox
