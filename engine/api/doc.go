// Package api is the engine's HTTP API: the routes of POST /v1/decide, the
// holds (list, get with long-poll, resolve), the kill switch, health and
// readiness; their authentication (bearer tokens, portal-issued gate
// credentials checked by introspection); strict reading of bodies and
// query strings; and the listener's connection bound. It calls the engine
// for decisions and the hold store through the interfaces package engine
// declares, and answers every error as the engine's error document.
package api
