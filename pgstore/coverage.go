package pgstore

import (
	"context"
	"fmt"

	"github.com/forage-go/forage/checkpoint"
)

// addCoverageSQL merges a range into a series' coverage in one upsert. The
// coverage is a multirange, whose union keeps its ranges sorted, disjoint
// and merged wherever they overlap or touch ([0,5) and [5,9) become [0,9)),
// which is the checkpoint.Coverage rule. ON CONFLICT locks the series' row,
// so concurrent merges of one series take turns and none is lost; a range
// already covered writes nothing. Parameters: series, start and end
// (seconds, nanoseconds).
var addCoverageSQL = `
INSERT INTO {{schema}}.coverage AS c (series, ranges)
VALUES ($1::text, nummultirange(numrange(` + numTime("$2", "$3") + `, ` + numTime("$4", "$5") + `, '[)')))
ON CONFLICT (series) DO UPDATE SET ranges = c.ranges + excluded.ranges
WHERE NOT c.ranges @> excluded.ranges`

// coverageSQL lists a series' ranges in order.
var coverageSQL = `
SELECT ` + timeNum("lower(r)") + `, ` + timeNum("upper(r)") + `
FROM {{schema}}.coverage c, unnest(c.ranges) AS r
WHERE c.series = $1
ORDER BY lower(r)`

// AddCoverage implements [checkpoint.Coverages.AddCoverage] with one upsert
// that merges on write.
func (s *Store) AddCoverage(ctx context.Context, series string, r checkpoint.Range) error {
	if err := enter(ctx, checkSeries(series, r)); err != nil {
		return err
	}
	start, end := splitTime(r.Start), splitTime(r.End)
	if _, err := s.pool.Exec(ctx, s.sql.addCoverage, series, start[0], start[1], end[0], end[1]); err != nil {
		return s.failWrite(fmt.Sprintf("AddCoverage %q %v", series, r), err)
	}
	return nil
}

// Coverage implements [checkpoint.Coverages.Coverage].
func (s *Store) Coverage(ctx context.Context, series string) (checkpoint.Coverage, error) {
	if err := enter(ctx, checkpoint.CheckName("series", series)); err != nil {
		return checkpoint.Coverage{}, err
	}
	rows, err := s.pool.Query(ctx, s.sql.coverage, series)
	if err != nil {
		return checkpoint.Coverage{}, s.fail(fmt.Sprintf("Coverage %q", series), err)
	}
	defer rows.Close()
	var c checkpoint.Coverage
	for rows.Next() {
		var lo, hi [2]*int64
		if err := rows.Scan(&lo[0], &lo[1], &hi[0], &hi[1]); err != nil {
			return checkpoint.Coverage{}, s.fail(fmt.Sprintf("Coverage %q", series), err)
		}
		c.Add(checkpoint.Range{Start: joinTime(lo), End: joinTime(hi)})
	}
	if err := rows.Err(); err != nil {
		return checkpoint.Coverage{}, s.fail(fmt.Sprintf("Coverage %q", series), err)
	}
	return c, nil
}
