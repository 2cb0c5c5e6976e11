package logstore

import "github.com/logplayer/logplayer/logstore/api"

// Bounds of the topic listings, defined in package api (the edge, which
// serves Status and ListTopics) and kept here under their old names.
const (
	// StatusTopicsMax is how many topics Status lists (the smallest names).
	StatusTopicsMax = api.StatusTopicsMax
	// ListTopicsDefault and ListTopicsMax are a ListTopics page's default
	// and largest size.
	ListTopicsDefault = api.ListTopicsDefault
	ListTopicsMax     = api.ListTopicsMax
)
