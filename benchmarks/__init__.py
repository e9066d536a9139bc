# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Performance measurements of gpu_ops.cluster (``python -m benchmarks``; results under benchmarks/results/)."""
