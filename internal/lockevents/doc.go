// Package lockevents is the pub/sub side of pkg/redislock's locks, shared
// by the lock engine and the controller: the name of each lock's events
// channel, and a subscription that stays alive through faults.
//
// It is internal because only these two read lock events; a library user
// waits for a release with redislock.Client.WatchReleases.
package lockevents
