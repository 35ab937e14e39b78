// Package envelope is the Action Envelope (spec §2.1) as svc reads it,
// shared by the engine and by whatever builds envelopes for it (the
// gateway connector): parsing, the canonical values policy reads, the
// envelope hash, and the strict JSON reading all of them rely on. It
// imports none of the engine's server, evaluators, holds or ledger.
//
// Reading an envelope:
//   - ParseEnvelope decodes, validates and canonicalises a wire document
//     (docs/api.md). It returns ErrInvalidJSON for malformed JSON and an
//     *InvalidEnvelope, naming the field at fault, for a document that
//     breaks the envelope contract: an ambiguous key, an inexact number, a
//     missing or out-of-range value.
//   - Envelope and its parts (Agent, Action, Target, Magnitude, Axes,
//     Approval, Meta) hold the canonical values; Reversibilities,
//     BlastRadii and Externalities are the closed axis enums, Verbs and
//     Environments the canonical verbs and environments, ModeEnforce and
//     ModeObserve the modes, MaxMagnitude the largest magnitude.count.
//
// Building an envelope (a connector classifying a tool call):
//   - VerbOf reads one name, a verb or a tool name, as the canonical verb,
//     and says whether any of its words is known; CanonicalVerb is the
//     engine's reading of a verb with its ability and reversibility.
//   - CanonicalEnvironment reads an environment name (unknown names read
//     as production); Clean and Fold are the text normalisations every
//     caller-supplied string gets (Fold is the compared form: case,
//     Unicode compatibility forms, invisible characters and look-alikes).
//   - (*Envelope).MarshalWire writes the wire document POST /v1/decide
//     reads, checked as the engine will check it.
//   - (*Envelope).Hash and ParamsHash are the envelope hash and params hash
//     an approval binds to (docs/envelope-hash.md).
//
// Strict JSON reading, for other documents that two JSON readers could read
// differently: MemberNames, ExactMembers, ScanObject with ObjectScanner,
// MemberName, JSONString, KeySet, MemberFault, and the refusal reasons
// ReasonDuplicateKey and ReasonSpelling.
package envelope
