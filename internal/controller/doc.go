// Package controller reflects the live holder of each RedisLock from Redis
// into its status. It reacts to the lock scripts' pub/sub messages and to a
// timer set for the holder's expiry, writes status only when something a
// user can see has changed, and acts on the force-release annotation and
// the deletion policy.
package controller
