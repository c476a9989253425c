"""symmpin.summary on made-up statistics (the JSON preload/stats.c writes): the merge over ranks,
the time saved and when it is 'not measured', the busiest sites, and nothing at all when no rank
made a communicator."""

import json
import os
import tempfile
import unittest

from symmpin import summary


def rank_doc(rank, samples=(3, 3)):
    """Two ranks' worth: site 0x1 timed both ways (10 us least on NCCL, 4 on symmpin, 10 calls
    redirected: 60 us a rank); site 0x3 timed only twice on NCCL (too few: it must not count);
    site 0x2 never redirected. The medians (12, 14) are not what the time saved uses."""
    return {"version": 1, "comms": [{"ordinal": 0, "rank": rank, "nranks": 2, "device": rank,
            "pool": {"pool_bytes": 4096, "dedicated_bytes": 8192, "capture_bytes": 1024,
                     "capture_used_bytes": 0},
            "sites": [
        {"site": "0x1", "calls": 12, "redirected": 10, "reasons": {"warmup": 2},
         "where": {"module": "/x/app", "offset": "0x40", "symbol": "step"},
         "time_us": {"nccl": 12.0, "symmpin": 4.0, "nccl_least": 10.0, "symmpin_least": 4.0,
                     "samples": list(samples)}},
        {"site": "0x3", "calls": 12, "redirected": 10, "reasons": {"warmup": 2},
         "time_us": {"nccl": 14.0, "symmpin": 4.0, "nccl_least": 14.0, "symmpin_least": 4.0,
                     "samples": [2, 9]}},
        {"site": "0x2", "calls": 3, "redirected": 0, "reasons": {"warmup": 3}}]}]}


class Summary(unittest.TestCase):
    def test_merges_ranks_of_one_communicator(self):
        out = summary.lines(summary.merge([rank_doc(0), rank_doc(1)]))
        self.assertEqual(out[0], "symmpin: communicator 0 (2 ranks; seen: 0,1): 40 of 54 "
                                 "all-reduces on symmpin (74%), 3 call site(s)")
        self.assertEqual(out[1], "symmpin:   to NCCL: warmup 14")

    def test_each_collective_counted_where_there_are_others(self):
        doc = rank_doc(0)
        sites = doc["comms"][0]["sites"]
        sites[0]["coll"] = "allreduce"
        sites[1]["coll"] = "allgather"
        sites[2]["coll"] = "reducescatter"
        sites[2]["reasons"] = {"off": 3}
        out = summary.lines(summary.merge([doc]))
        self.assertEqual(out[0], "symmpin: communicator 0 (2 ranks; seen: 0): 20 of 27 collective "
                                 "calls (allreduce 10/12, allgather 10/12, reducescatter 0/3) on "
                                 "symmpin (74%), 3 call site(s)")
        self.assertEqual(out[1], "symmpin:   to NCCL: warmup 4, off 3")

    def test_time_saved_counts_only_sites_timed_often_enough(self):
        text = "\n".join(summary.lines(summary.merge([rank_doc(0), rank_doc(1)])))
        self.assertIn("time saved: about 0.060 ms per rank (measured on 1 of 3 site(s)", text)

    def test_too_few_samples_is_not_measured_never_a_guess(self):
        text = "\n".join(summary.lines(summary.merge([rank_doc(0, (3, 2)), rank_doc(1, (3, 2))])))
        self.assertIn("time saved: not measured", text)
        self.assertNotIn("time saved: about", text)

    def test_a_loss_is_called_a_loss(self):
        doc = rank_doc(0)
        doc["comms"][0]["sites"][0]["time_us"]["symmpin_least"] = 20.0
        text = "\n".join(summary.lines(summary.merge([doc])))
        self.assertIn("time saved: about -0.100 ms per rank (a loss", text)

    def test_busiest_site_first_with_its_place(self):
        out = summary.lines(summary.merge([rank_doc(0)]))
        sites = [ln for ln in out if ln.startswith("symmpin:   site ")]
        self.assertEqual(sites[0], "symmpin:   site 0x1 at app+0x40 (step): 12 calls, 10 on "
                                   "symmpin; to NCCL: warmup 2")
        self.assertIn("(location unknown)", sites[1])

    def test_pool_line(self):
        text = "\n".join(summary.lines(summary.merge([rank_doc(0)])))
        self.assertIn("symmetric pool 4096 bytes per rank (one slot per site would need 8192; "
                      "of the pool, a capture arena of 1024 for CUDA graphs, 0 used)", text)

    def test_nothing_without_a_communicator(self):
        self.assertEqual(summary.lines(summary.merge([])), [])
        self.assertEqual(summary.lines(summary.merge([{"version": 1, "comms": []}])), [])

    def test_communicators_in_ordinal_order(self):
        a, b = rank_doc(0), rank_doc(0)
        b["comms"][0]["ordinal"] = 1
        heads = [ln for ln in summary.lines(summary.merge([b, a])) if "communicator" in ln]
        self.assertTrue(heads[0].startswith("symmpin: communicator 0 "))
        self.assertTrue(heads[1].startswith("symmpin: communicator 1 "))

    def test_unreadable_statistics_are_named_and_skipped(self):
        with tempfile.TemporaryDirectory() as d:
            good, bad = os.path.join(d, "good.json"), os.path.join(d, "bad.json")
            with open(good, "w") as f:
                json.dump(rank_doc(0), f)
            with open(bad, "w") as f:
                f.write("{not json")
            docs, warnings = summary.read([good, bad, os.path.join(d, "missing.json")])
        self.assertEqual(len(docs), 1)
        self.assertEqual(len(warnings), 2)
        self.assertTrue(warnings[0].startswith(f"symmpin: skipping unreadable statistics {bad}"))


if __name__ == "__main__":
    unittest.main()
