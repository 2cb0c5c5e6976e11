--------------------------- MODULE LogStoreApply ---------------------------
(***************************************************************************)
(* One LogStore node applying committed Raft entries to its segment log    *)
(* (DESIGN.md section 4, "Storage and crash safety"; logstore/fsm.go,      *)
(* logstore/apply.go, logstore/node.go recover, logstore/segment).         *)
(*                                                                         *)
(* A Raft entry holds several transactions, each with slices for several   *)
(* topics.  Apply writes one CRC-framed record per transaction (its LSN,   *)
(* the entry's Raft index and one slice per topic with its offset), with   *)
(* no fsync, and advances the visible head once the whole entry is         *)
(* written.  The client of an entry is acknowledged once the entry is      *)
(* applied (hashicorp/raft's Apply future).  A snapshot captures the FSM   *)
(* state between entries; persisting it syncs the segment log and keeps a  *)
(* copy of its records up to the captured LSN (segment.Checkpoint), after  *)
(* which Raft may forget the entries up to its index.  A crash keeps the   *)
(* synced prefix of the file and any part of the rest, possibly a torn     *)
(* record (bad CRC) and, since pages are written back in any order, whole  *)
(* records after it.  Recovery keeps the records up to the first bad CRC   *)
(* (segment.Open), drops those above the snapshot's Raft index             *)
(* (TruncateAfterRaftIndex), reinstalls the snapshot's copy if the log is  *)
(* behind it, loads the snapshot's FSM state, and Raft re-applies every    *)
(* committed entry after the snapshot.                                     *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets

CONSTANTS
    Entries,         \* Entries[i]: the transactions of Raft entry i; each a
                     \* sequence of distinct topics (one slice per topic)
    Topics,          \* every topic named in Entries
    NCRASH,          \* crashes in a behaviour
    SyncOnSnapshot,  \* FALSE: the Broken variant: a snapshot neither syncs
                     \* the segment log nor keeps a copy of its records
    NINSTALL,        \* snapshots the leader may install (InstallSnapshot)
    UseCRC           \* FALSE: the Broken variant: recovery does not check
                     \* the records' CRCs, only their Raft index

NENTRIES == Len(Entries)

ASSUME NCRASH \in Nat /\ SyncOnSnapshot \in BOOLEAN /\ NINSTALL \in Nat /\ UseCRC \in BOOLEAN
ASSUME \A i \in 1..NENTRIES : Len(Entries[i]) > 0

(* The model used by LogStoreApply.cfg: 5 entries, 9 transactions.         *)
ModelEntries == << << <<"x", "y">>, <<"x">> >>,
                   << <<"y">> >>,
                   << <<"y", "x">> >>,
                   << <<"x">>, <<"y">> >>,
                   << <<"x", "y">>, <<"y">>, <<"x">> >> >>
ModelTopics == {"x", "y"}

(***************************************************************************)
(* What the log must hold: the transactions of all entries in order, the   *)
(* k-th with LSN k and, per topic, the next dense offset.                  *)
(***************************************************************************)
RECURSIVE Flatten(_)
Flatten(es) == IF es = <<>> THEN <<>>
               ELSE Flatten(SubSeq(es, 1, Len(es) - 1))
                    \o [j \in 1..Len(es[Len(es)]) |->
                          [idx |-> Len(es), pos |-> j, topics |-> es[Len(es)][j]]]
Txns == Flatten(Entries)          \* constant: TLC computes it once
NTXNS == Len(Txns)

\* Transactions in entries 1..e.
TxnsUpTo(e) == Len(Flatten(SubSeq(Entries, 1, e)))
TxnsUpToTab == [e \in 0..NENTRIES |-> TxnsUpTo(e)]

TopicsBefore(k) == [t \in Topics |->
                      Cardinality({i \in 1..k - 1 : \E j \in 1..Len(Txns[i].topics) : Txns[i].topics[j] = t})]

Expected == [k \in 1..NTXNS |->
               [lsn |-> k, idx |-> Txns[k].idx, pos |-> Txns[k].pos, crc |-> TRUE,
                slices |-> [j \in 1..Len(Txns[k].topics) |->
                              [topic |-> Txns[k].topics[j],
                               off   |-> TopicsBefore(k)[Txns[k].topics[j]]]]]]

(* A record whose write was cut: only its first slice reached the disk.    *)
Torn(r) == [r EXCEPT !.crc = FALSE, !.slices = SubSeq(@, 1, 1)]
(* A record whose header never reached the disk either (a zeroed page):    *)
(* its Raft index reads 0, at or below any snapshot's, so only the CRC     *)
(* check tells it from a good record.                                      *)
Garbage(r) == [lsn |-> 0, idx |-> 0, pos |-> 0, crc |-> FALSE, slices |-> <<>>]

\* FSM state (logstore state: lastLSN, lastIndex, per-topic next offsets).
State0 == [lsn |-> 0, idx |-> 0, next |-> [t \in Topics |-> 0]]
NoSnap == [idx |-> 0, st |-> State0]
\* The FSM state once entries 1..e are applied (a leader's snapshot).
StateAt(e) == [lsn |-> TxnsUpToTab[e], idx |-> e, next |-> TopicsBefore(TxnsUpToTab[e] + 1)]

VARIABLES
    commit,     \* Raft commit index: entries 1..commit are committed and kept
                \* in Raft's log (raft-boltdb, fsynced) until a snapshot
    up,         \* the node runs
    st,         \* FSM state; st.idx = entries fully applied
    wpos,       \* transactions of entry st.idx + 1 written so far (0: none)
    file,       \* the segment log as the node sees it (page cache)
    durable,    \* length of its prefix that is on disk (synced)
    head,       \* visible head: readers see LSNs 1..head
    pend,       \* snapshot captured on the FSM goroutine, not yet persisted
    snap,       \* newest durable snapshot: Raft index, FSM state, and its
                \* copy of the records (segment.Checkpoint); data = <<>>
                \* and idx = 0 when none
    snapData,
    acked,      \* highest entry whose client was acknowledged (ghost)
    crashes,
    failed,     \* recovery found the log behind the snapshot, with no copy
    installing, \* a leader's snapshot is being installed (fsm.Restore)
    installs

vars == <<commit, up, st, wpos, file, durable, head, pend, snap, snapData,
          acked, crashes, failed, installing, installs>>

Init ==
    /\ commit = 0 /\ up = TRUE /\ st = State0 /\ wpos = 0
    /\ file = <<>> /\ durable = 0 /\ head = 0
    /\ pend = NoSnap /\ snap = NoSnap /\ snapData = <<>>
    /\ acked = 0 /\ crashes = 0 /\ failed = FALSE
    /\ installing = FALSE /\ installs = 0

\* Raft commits the next entry (replicated and fsynced on a quorum).
Commit ==
    /\ commit < NENTRIES
    /\ commit' = commit + 1
    /\ UNCHANGED <<up, st, wpos, file, durable, head, pend, snap, snapData, acked, crashes, failed, installing, installs>>

\* stateMachine.applyEntry -> write -> segment.Log.Append: one record for the
\* next transaction of entry st.idx + 1, LSN and offsets from the FSM state.
WriteRecord ==
    /\ up /\ ~installing /\ st.idx < commit
    /\ wpos < Len(Entries[st.idx + 1])
    /\ LET tps == Entries[st.idx + 1][wpos + 1]
           rec == [lsn |-> st.lsn + 1, idx |-> st.idx + 1, pos |-> wpos + 1, crc |-> TRUE,
                   slices |-> [j \in 1..Len(tps) |-> [topic |-> tps[j], off |-> st.next[tps[j]]]]]
       IN  /\ file' = Append(file, rec)
           /\ st' = [st EXCEPT !.lsn = @ + 1,
                               !.next = [t \in Topics |-> IF \E j \in 1..Len(tps) : tps[j] = t
                                                          THEN @[t] + 1 ELSE @[t]]]
           /\ wpos' = wpos + 1
    /\ UNCHANGED <<commit, up, durable, head, pend, snap, snapData, acked, crashes, failed, installing, installs>>

\* fsm.Apply returns: the entry is applied, the head advances past all of
\* its transactions at once (fsm.advance), its clients get their answers.
FinishEntry ==
    /\ up /\ ~installing /\ st.idx < commit
    /\ wpos = Len(Entries[st.idx + 1])
    /\ st' = [st EXCEPT !.idx = @ + 1]
    /\ wpos' = 0
    /\ head' = st.lsn
    /\ acked' = IF st.idx + 1 > acked THEN st.idx + 1 ELSE acked
    /\ UNCHANGED <<commit, up, file, durable, pend, snap, snapData, crashes, failed, installing, installs>>

\* fsm.Snapshot: captures the state between entries (it takes fsm.mu).
CaptureSnapshot ==
    /\ up /\ ~installing /\ wpos = 0 /\ pend = NoSnap /\ st.idx > snap.idx
    /\ pend' = [idx |-> st.idx, st |-> st]
    /\ UNCHANGED <<commit, up, st, wpos, file, durable, head, snap, snapData, acked, crashes, failed, installing, installs>>

\* fsmSnapshot.Persist -> segment.Checkpoint(upTo): Sync (everything written
\* so far becomes durable), keep the records up to the captured LSN, then the
\* snapshot is durable and Raft may compact its log up to its index.
PersistSnapshot ==
    /\ up /\ pend # NoSnap
    /\ snap' = pend
    /\ IF SyncOnSnapshot
       THEN /\ durable' = Len(file)
            /\ snapData' = SubSeq(file, 1, pend.st.lsn)
       ELSE UNCHANGED <<durable, snapData>>
    /\ pend' = NoSnap
    /\ UNCHANGED <<commit, up, st, wpos, file, head, acked, crashes, failed, installing, installs>>

\* The leader sends a snapshot of entries 1..e to this node, which is behind
\* (hashicorp/raft InstallSnapshot): raft stores it as the newest snapshot,
\* then fsm.Restore -> restoreArchive -> segment.Log.Install removes the
\* segment files (durably: its install marker) and copies the snapshot's.
\* Readers wait (the head is set again at the end: fsm.forceHead).
InstallBegin ==
    /\ up /\ ~installing /\ installs < NINSTALL /\ wpos = 0 /\ pend = NoSnap
    /\ \E e \in st.idx + 1..commit :
          /\ snap' = [idx |-> e, st |-> StateAt(e)]
          /\ snapData' = SubSeq(Expected, 1, TxnsUpToTab[e])
    /\ installing' = TRUE
    /\ installs' = installs + 1
    /\ file' = <<>>
    /\ durable' = 0
    /\ head' = 0
    /\ UNCHANGED <<commit, up, st, wpos, pend, acked, crashes, failed>>

\* Install has copied (and synced) the snapshot's records; the FSM takes the
\* snapshot's state and the head its LSN.
InstallEnd ==
    /\ up /\ installing
    /\ file' = snapData
    /\ durable' = Len(snapData)
    /\ st' = snap.st
    /\ head' = snap.st.lsn
    /\ installing' = FALSE
    /\ UNCHANGED <<commit, up, wpos, pend, snap, snapData, acked, crashes, failed, installs>>

\* What a crash leaves on disk: the synced prefix and some more whole
\* records, then maybe a torn record, then maybe the whole records after it.
AfterCrash ==
    UNION {
      {SubSeq(file, 1, k)} \cup
      (IF k < Len(file)
       THEN UNION {{Append(SubSeq(file, 1, k), bad),
                    Append(SubSeq(file, 1, k), bad) \o SubSeq(file, k + 2, Len(file))}
                   : bad \in {Torn(file[k + 1]), Garbage(file[k + 1])}}
       ELSE {})
      : k \in durable..Len(file)}

Crash ==
    /\ up /\ crashes < NCRASH
    /\ up' = FALSE
    /\ \E f \in AfterCrash : file' = f
    /\ durable' = Len(file')
    /\ head' = 0
    /\ pend' = NoSnap
    /\ wpos' = 0
    /\ crashes' = crashes + 1
    /\ installing' = FALSE
    /\ UNCHANGED <<commit, st, snap, snapData, acked, failed, installs>>

\* The records before the first bad CRC (segment.Open), and of those the
\* ones at or below Raft index i (segment.Log.TruncateAfterRaftIndex).
RECURSIVE GoodPrefix(_)
GoodPrefix(s) == IF s # <<>> /\ (s[1].crc \/ ~UseCRC) THEN <<s[1]>> \o GoodPrefix(Tail(s)) ELSE <<>>
RECURSIVE UpToIndex(_, _)
UpToIndex(s, i) == IF s # <<>> /\ s[1].idx <= i THEN <<s[1]>> \o UpToIndex(Tail(s), i) ELSE <<>>

\* NewNode: segment.Open (cut after the last good CRC), Node.recover (load the
\* newest snapshot, TruncateAfterRaftIndex(snap.idx), reinstall the
\* snapshot's copy if the log is behind it); head = the snapshot's LSN; Raft
\* then re-applies the committed entries after snap.idx.
Recover ==
    /\ ~up /\ ~failed
    /\ LET cut == UpToIndex(GoodPrefix(file), snap.idx)
           f   == IF Len(cut) < snap.st.lsn /\ Len(snapData) = snap.st.lsn THEN snapData ELSE cut
       IN  /\ file' = f
           /\ durable' = Len(f)
           \* Node.recover refuses to start when the log and the snapshot
           \* disagree: the node stays down.
           /\ failed' = (Len(f) # snap.st.lsn)
           /\ up' = (Len(f) = snap.st.lsn)
    /\ st' = snap.st
    /\ head' = snap.st.lsn
    /\ wpos' = 0
    /\ UNCHANGED <<commit, pend, snap, snapData, acked, crashes, installing, installs>>

Done == up /\ st.idx = NENTRIES /\ head = NTXNS /\ file = Expected

\* Everything is applied and the crashes are spent: stutter, so that TLC
\* reports any other state where nothing can move as a deadlock.
Finished == Done /\ crashes = NCRASH /\ UNCHANGED vars

Next == Commit \/ WriteRecord \/ FinishEntry \/ CaptureSnapshot \/ PersistSnapshot
        \/ InstallBegin \/ InstallEnd \/ Crash \/ Recover \/ Finished

Spec == Init /\ [][Next]_vars
        /\ WF_vars(Commit) /\ WF_vars(WriteRecord) /\ WF_vars(FinishEntry)
        /\ WF_vars(InstallEnd) /\ WF_vars(Recover)

(***************************************************************************)
(* Properties                                                              *)
(***************************************************************************)
TypeOK ==
    /\ commit \in 0..NENTRIES /\ up \in BOOLEAN /\ st.idx \in 0..NENTRIES
    /\ head \in 0..NTXNS /\ durable \in 0..Len(file) /\ crashes \in 0..NCRASH
    /\ installing \in BOOLEAN /\ installs \in 0..NINSTALL

\* LSNs are dense: the k-th record has LSN k.
DenseLSNs == up /\ ~installing => \A k \in 1..Len(file) : file[k].lsn = k

\* Per topic, offsets along the log are 0, 1, 2, ...
DenseOffsets ==
    up /\ ~installing => \A t \in Topics :
            LET offs == [k \in 1..Len(file) |->
                           {file[k].slices[j].off : j \in {j \in 1..Len(file[k].slices) : file[k].slices[j].topic = t}}]
            IN  \A k \in 1..Len(file) : \A o \in offs[k] :
                    o = Cardinality({i \in 1..k - 1 : offs[i] # {}})

\* No transaction is in the log twice.
NoDuplicate ==
    up /\ ~installing => \A i, k \in 1..Len(file) :
            i # k => <<file[i].idx, file[i].pos>> # <<file[k].idx, file[k].pos>>

\* The strongest form: while running, the log is a prefix of what it must
\* hold, at least everything applied, and the FSM state matches it.
MatchesLog ==
    up /\ ~installing => /\ file = SubSeq(Expected, 1, Len(file))
          /\ Len(file) = TxnsUpToTab[st.idx] + wpos
          /\ st.lsn = Len(file)

\* Atomic visibility: every visible LSN is a whole record (good CRC, one
\* slice per topic of its transaction), and so is every other transaction of
\* the same entry: a reader never sees part of a transaction (nor of an entry).
AtomicVisibility ==
    up /\ ~installing => /\ head <= Len(file)
          /\ \A k \in 1..head :
                /\ file[k].crc
                /\ Len(file[k].slices) = Len(Txns[k].topics)
                /\ TxnsUpToTab[file[k].idx] <= head

\* No acknowledged transaction is lost: while the node runs, every
\* acknowledged entry is either applied and in the log (each of its
\* transactions as the log must hold it), or above the applied index, so
\* still in Raft's log (Raft forgets only entries at or below the snapshot,
\* and st.idx >= snap.idx) and about to be re-applied.  And recovery never
\* finds the log behind the snapshot with nothing to reinstall.
NoAckedLost ==
    /\ ~failed
    /\ up /\ ~installing => \A e \in 1..acked : e <= st.idx =>
                \A k \in TxnsUpToTab[e - 1] + 1..TxnsUpToTab[e] :
                    k <= Len(file) /\ file[k] = Expected[k]

\* Why: every acknowledged entry that Raft may have forgotten (at or below
\* the snapshot's index) has its records on disk, in the synced prefix of
\* the segment log or in the snapshot's copy, at every moment.
SnapshotDurable ==
    \A e \in 1..acked : e <= snap.idx =>
        \A k \in TxnsUpToTab[e - 1] + 1..TxnsUpToTab[e] :
            \/ k <= Len(snapData) /\ snapData[k] = Expected[k]
            \/ k <= durable /\ file[k] = Expected[k]

\* Liveness: after the crashes, every committed transaction is in the log
\* once and visible.
EventuallyAllVisible == <>[]Done

=============================================================================
