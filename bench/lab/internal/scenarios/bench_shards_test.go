package scenarios

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestBenchShards drains over one and two clusters of the bench's own, by
// key and by queue, and checks every figure is there, the jobs spread over
// the shards, the servers' CPU was measured per shard, and the clusters'
// directories are gone.
func TestBenchShards(t *testing.T) {
	for _, placement := range []string{"key", "queue"} {
		t.Run(placement, func(t *testing.T) {
			checkTempRoot := privateTempRoot(t)
			plotPath := filepath.Join(t.TempDir(), "shards.png")
			r := mustLab(t, "shards", "--shards", "2", "--jobs", "4000", "--placement", placement,
				"--workers", "20", "--json", "--quiet", "--plot", plotPath)
			var res shardsResult
			if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
				t.Fatalf("--json must print only a JSON object: %v\n%s", err, r.Stdout)
			}
			if res.Placement != placement || len(res.Steps) != 3 || !res.Steps[0].Direct {
				t.Fatalf("result: %+v", res)
			}
			for i, s := range res.Steps {
				n := max(i, 1)
				if s.Shards != n || len(s.ShardCPUPerJobUS) != n || len(s.ShardJobs) != n {
					t.Fatalf("step %d: %+v", i, s)
				}
				var total int64
				for shard, jobs := range s.ShardJobs {
					if jobs < 4000/int64(n)/2 {
						t.Errorf("step %d: shard %d completed %d of 4000 jobs: uneven spread %v", i, shard, jobs, s.ShardJobs)
					}
					if s.ShardCPUPerJobUS[shard] <= 0 {
						t.Errorf("step %d: no server CPU measured on shard %d", i, shard)
					}
					total += jobs
				}
				if total != 4000 || s.JobsPerS <= 0 || s.ClientCPUPerJobUS <= 0 || s.ServerBoundJobsPerS <= 0 {
					t.Errorf("step %d: %d jobs completed, figures %+v", i, total, s)
				}
			}
			checkPlot(t, plotPath)
			checkTempRoot() // the clusters' directories are gone
		})
	}
}
