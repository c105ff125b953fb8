# A small image of toolcodec: `toolcodec serve`, `toolcodec worker` and the CLI.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY codec ./codec
COPY worker ./worker
COPY pool ./pool
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
COPY --from=build /install /usr/local
RUN useradd --system --uid 10001 toolcodec
USER toolcodec
EXPOSE 8080 9100
ENTRYPOINT ["toolcodec"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
