package api

import (
	"container/list"
	"sync"
	"time"
)

type gateCache struct {
	mu      sync.Mutex
	size    int
	entries map[string]*list.Element
	order   *list.List // of *gateEntry
}

type gateEntry struct {
	key     string
	gate    string
	expires time.Time
}

func newGateCache(size int) *gateCache {
	return &gateCache{size: size, entries: map[string]*list.Element{}, order: list.New()}
}

func (c *gateCache) get(key string, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return "", false
	}
	e := el.Value.(*gateEntry)
	if !now.Before(e.expires) {
		c.remove(el)
		return "", false
	}
	return e.gate, true
}

func (c *gateCache) put(key, gate string, expires, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.remove(el)
	}
	if c.order.Len() >= c.size {
		for el := c.order.Front(); el != nil; {
			next := el.Next()
			if !now.Before(el.Value.(*gateEntry).expires) {
				c.remove(el)
			}
			el = next
		}
	}
	for c.order.Len() >= c.size {
		c.remove(c.order.Front())
	}
	c.entries[key] = c.order.PushBack(&gateEntry{key: key, gate: gate, expires: expires})
}

func (c *gateCache) remove(el *list.Element) {
	delete(c.entries, el.Value.(*gateEntry).key)
	c.order.Remove(el)
}
