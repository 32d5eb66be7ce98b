package redislock

import "testing"

// The check value of CRC-16/XMODEM, and the slots Redis Cluster documents.
func TestCRC16MatchesRedisCluster(t *testing.T) {
	if got := crc16("123456789"); got != 0x31c3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	tags := slotTags()
	for s, tag := range tags {
		if tag == "" || slot(tag) != uint16(s) {
			t.Fatalf("slot %d: tag %q hashes to %d", s, tag, slot(tag))
		}
	}
}
