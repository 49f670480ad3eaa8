#!/usr/bin/env bash
set -euo pipefail
cat > tests/test_slug.py <<'PY'
import unittest

from text.slug import slugify


class SlugifyTest(unittest.TestCase):
    def test_lower_case_and_separators(self):
        self.assertEqual(slugify("Hello World"), "hello-world")
        self.assertEqual(slugify("C++ & Rust: 2024!"), "c-rust-2024")

    def test_runs_collapse_and_ends_are_trimmed(self):
        self.assertEqual(slugify("  --a   b--  "), "a-b")
        self.assertEqual(slugify("a___b...c"), "a-b-c")

    def test_accents_removed_other_unicode_dropped(self):
        self.assertEqual(slugify("Crème Brûlée"), "creme-brulee")
        self.assertEqual(slugify("naïve café 日本"), "naive-cafe")

    def test_empty(self):
        self.assertEqual(slugify(""), "n-a")
        self.assertEqual(slugify("!!!"), "n-a")
        self.assertEqual(slugify("日本語"), "n-a")

    def test_truncation_at_word_boundary(self):
        self.assertEqual(slugify("alpha beta gamma", max_length=10), "alpha-beta")
        self.assertEqual(slugify("alpha beta gamma", max_length=12), "alpha-beta")
        self.assertEqual(slugify("alpha beta", max_length=10), "alpha-beta")
        self.assertEqual(slugify("abc def", max_length=4), "abc")

    def test_single_long_word(self):
        self.assertEqual(slugify("abcdefghij", max_length=4), "abcd")

    def test_result_length_and_default(self):
        slug = slugify("word " * 40)
        self.assertLessEqual(len(slug), 50)
        self.assertFalse(slug.endswith("-"))
        self.assertTrue(slug.startswith("word-word"))
PY
