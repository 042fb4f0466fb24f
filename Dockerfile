# normvar: worker + dashboard in one CUDA-capable image (mirrors the Makefile: `make venv`, `make run`).
# The PyPI torch wheel (torch==2.13.0, pinned in requirements.txt) bundles its CUDA runtime, so a slim
# Debian base suffices; run with the NVIDIA container toolkit to use the GPU (the worker picks cuda
# automatically; device=auto), or without it on CPU.
#   docker build -t normvar .
#   docker run --gpus all -p 8501:8501 -v normvar-data:/data normvar
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 \
    NORMVAR_DATA=/data
# make: the Makefile drives set-up; chromium: kaleido's PNG/SVG export of the figures
RUN apt-get update && apt-get install -y --no-install-recommends make chromium \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.txt requirements-dev.txt requirements-models.txt pyproject.toml Makefile ./
COPY normvar_core/__init__.py normvar_core/__init__.py
RUN make venv
COPY . .
RUN .venv/bin/pip install -q --no-deps -e . && touch .venv/.installed

VOLUME /data
EXPOSE 8501
# `make run` = `normvar up`: worker + dashboard, submits the default run on an empty /data
CMD [".venv/bin/python", "-m", "normvar_core.service.cli", "up", "--data-dir", "/data", "--host", "0.0.0.0", "--port", "8501"]
