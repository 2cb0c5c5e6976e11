package logstore

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// SaveBackup writes the backup that stream sends (client.Client.Backup
// with its context: it calls open with the backup's info, and again after
// a restart, then writes the archive) to path: into a temporary file
// beside it, framed by a BackupWriter, synced, checked with VerifyBackup,
// then renamed over path and the directory synced. An error from stream
// is returned as it is; path is not touched unless the whole backup
// verified. What `logplayer backup save` runs.
func SaveBackup(path string, stream func(open func(*logstorepb.BackupInfo) (io.Writer, error)) error) (BackupInfo, error) {
	var info BackupInfo
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return info, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	var bw *BackupWriter
	err = stream(func(bi *logstorepb.BackupInfo) (io.Writer, error) {
		if err := tmp.Truncate(0); err != nil {
			return nil, err
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		info = BackupInfo{RaftIndex: bi.RaftIndex, RaftTerm: bi.RaftTerm,
			FirstLSN: types.LSN(bi.FirstLsn), LastLSN: types.LSN(bi.LastLsn), ArchiveBytes: int64(bi.ArchiveBytes)}
		bw, err = NewBackupWriter(tmp, info)
		return bw, err
	})
	if err != nil {
		return info, err
	}
	if bw == nil {
		return info, errors.New("backup: empty stream")
	}
	if err := bw.Close(); err != nil {
		return info, err
	}
	if err := tmp.Sync(); err != nil {
		return info, err
	}
	if err := tmp.Close(); err != nil {
		return info, err
	}
	if _, err := VerifyBackup(tmp.Name()); err != nil {
		return info, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return info, err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return info, err
	}
	defer d.Close()
	return info, d.Sync()
}
