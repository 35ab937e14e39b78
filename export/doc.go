// Package export feeds svc's events to the outside world without ever
// slowing or failing a decision: decision, lifecycle and kill_switch events
// go to a syslog collector as RFC 5424 messages (JSON or CEF bodies, over
// UDP, or TCP/TLS with RFC 6587/5425 octet-counting framing), and hold and
// freeze events go to a webhook as signed JSON POSTs. Each destination has a
// bounded queue drained by one worker that does all network I/O; a full
// queue drops the event and counts it. The audit log, not this feed, is the
// authoritative record.
package export
