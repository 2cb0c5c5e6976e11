package logplayer

import "github.com/logplayer/logplayer/types"

// removedFloorsMax bounds the floors kept for removed targets (Player.floors).
// A target removed and added again reports its last floor until its first
// handshake (TestReAddedTargetKeepsFloor); the removals and re-adds that need
// it come close together (an operator resuming a blocked target, a group
// member's assignment moving away and back), so the latest 1024 removals
// are kept, a few tens of KiB, and the oldest is forgotten beyond.
const removedFloorsMax = 1024

// removedFloor is the floor last reported for a removed target, with the
// order of its removal.
type removedFloor struct {
	lsn types.LSN
	seq uint64
}

// floorOf returns the last floor this Player reported for id, live or
// recently removed.
func (p *Player) floorOf(id string) (types.LSN, bool) {
	p.floors.Lock()
	defer p.floors.Unlock()
	if lsn, ok := p.floors.last[id]; ok {
		return lsn, true
	}
	rf, ok := p.floors.removed[id]
	return rf.lsn, ok
}

// setFloor records lsn as reported for id by runner r, unless r was removed
// meanwhile (removeTarget's forgetFloor then already ran or will run after,
// under the same lock: a removed runner leaves no entry in last).
func (p *Player) setFloor(id string, r *runner, lsn types.LSN) {
	p.floors.Lock()
	defer p.floors.Unlock()
	if (*p.runners.Load())[id] != r {
		return
	}
	p.floors.last[id] = lsn
	delete(p.floors.removed, id)
}

// forgetFloor moves id's floor to the bounded record of removed targets.
// Call it after the runner was unpublished.
func (p *Player) forgetFloor(id string) {
	p.floors.Lock()
	defer p.floors.Unlock()
	lsn, ok := p.floors.last[id]
	if !ok {
		return
	}
	delete(p.floors.last, id)
	p.floors.seq++
	p.floors.removed[id] = removedFloor{lsn: lsn, seq: p.floors.seq}
	if len(p.floors.removed) <= p.floors.removedMax {
		return
	}
	oldest, min := "", ^uint64(0)
	for rid, rf := range p.floors.removed {
		if rf.seq < min {
			oldest, min = rid, rf.seq
		}
	}
	delete(p.floors.removed, oldest)
}
