"""YARN Policy Sidecar: research scheduling policies beside a Hadoop YARN ResourceManager."""

__version__ = "0.1.0"
