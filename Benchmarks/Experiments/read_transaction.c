// read_transaction: what does a read transaction cost a small SQLite read, and what would
// keeping one open across reads save? (issue #13; Benchmarks/README finding 11.)
//
// One table with the disk index's settings (2 KiB pages, WAL, synchronous=NORMAL), 15,000 rows
// of VALUE bytes under keys "key-N"; reads by key in a scattered order, hits ("key-N") and
// misses ("absent-N"), on one thread and on two threads with a connection each, three ways:
//
//   batch1    autocommit: every SELECT begins and ends its own read transaction
//   batch0    one transaction kept open while the wal-index header (the first 96 bytes of the
//             -shm file, mapped through the VFS's xShmMap) equals its copy from just before
//             BEGIN: what DiskStore's pooled readers do
//   batch256  BEGIN ... COMMIT around every 256 reads (an upper bound)
//
//   gcc -O2 -o /tmp/read_transaction Benchmarks/Experiments/read_transaction.c -lsqlite3 -lpthread
//   /tmp/read_transaction /tmp/read-transaction.db 100 2      (value bytes, rounds)
//
// Prints: round, hit|miss, mode, 1thr|2thr, reads per second.
#include <sqlite3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static const char *path; static int N=15000; static int VAL=100;
static sqlite3 *openc(void){sqlite3*db;sqlite3_open_v2(path,&db,SQLITE_OPEN_READWRITE|SQLITE_OPEN_CREATE|SQLITE_OPEN_NOMUTEX,0);
 sqlite3_exec(db,"PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;",0,0,0);return db;}
typedef struct {int batch; int miss; long ops; double secs;} job;
static volatile const unsigned char *shm_header(sqlite3 *db){sqlite3_file*f=0;sqlite3_file_control(db,"main",SQLITE_FCNTL_FILE_POINTER,&f);
 volatile void*p=0;int rc=f->pMethods->xShmMap(f,0,32768,0,&p);if(rc!=SQLITE_OK||!p){fprintf(stderr,"shm map failed %d\n",rc);exit(1);}return p;}
static void *run(void *a){job*j=a;sqlite3*db=openc();sqlite3_stmt*s,*b,*c;
 sqlite3_prepare_v2(db,"SELECT value FROM e WHERE key=?",-1,&s,0);
 sqlite3_prepare_v2(db,"BEGIN",-1,&b,0);sqlite3_prepare_v2(db,"COMMIT",-1,&c,0);
 char k[32]; double t0=now(); long got=0; volatile const unsigned char*hdr=0; unsigned char saved[96]; int open=0; long restarts=0;
 for(long i=0;i<j->ops;i++){
  if(j->batch==0){ if(!hdr){sqlite3_exec(db,"SELECT 1 FROM e LIMIT 1",0,0,0);hdr=shm_header(db);}
     if(!open||memcmp((const void*)hdr,saved,96)!=0){ if(open){sqlite3_step(c);sqlite3_reset(c);} __atomic_thread_fence(__ATOMIC_ACQUIRE); memcpy(saved,(const void*)hdr,96); sqlite3_step(b);sqlite3_reset(b);open=1;restarts++;} }
  else if(j->batch>1 && i%j->batch==0){sqlite3_step(b);sqlite3_reset(b);}
  int n=snprintf(k,sizeof k,j->miss?"absent-%ld":"key-%ld",(i*7919)%N);
  sqlite3_bind_text(s,1,k,n,SQLITE_STATIC);
  if(sqlite3_step(s)==SQLITE_ROW){got+=sqlite3_column_bytes(s,0);} sqlite3_reset(s);
  if(j->batch>1 && (i%j->batch==j->batch-1 || i==j->ops-1)){sqlite3_step(c);sqlite3_reset(c);}
 }
 if(open){sqlite3_step(c);sqlite3_reset(c);} j->secs=now()-t0; if(j->batch==0)fprintf(stderr,"restarts %ld\n",restarts); if(!j->miss && got!=(long)VAL*j->ops){fprintf(stderr,"bad %ld\n",got);exit(1);}
 sqlite3_finalize(s);sqlite3_finalize(b);sqlite3_finalize(c);sqlite3_close(db);return 0;}
int main(int argc,char**argv){path=argv[1]; VAL=atoi(argv[2]); int rounds=atoi(argv[3]); unlink(path);
 sqlite3*db=openc();sqlite3_exec(db,"PRAGMA page_size=2048;VACUUM;PRAGMA journal_mode=WAL;CREATE TABLE e(id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, value BLOB);",0,0,0);
 sqlite3_stmt*ins;sqlite3_prepare_v2(db,"INSERT INTO e(key,value) VALUES(?,?)",-1,&ins,0);char*v=malloc(VAL);memset(v,'v',VAL);char k[32];
 sqlite3_exec(db,"BEGIN",0,0,0);for(int i=0;i<N;i++){int n=snprintf(k,32,"key-%d",i);sqlite3_bind_text(ins,1,k,n,SQLITE_STATIC);sqlite3_bind_blob(ins,2,v,VAL,SQLITE_STATIC);sqlite3_step(ins);sqlite3_reset(ins);}sqlite3_exec(db,"COMMIT",0,0,0);
 int batches[]={1,0,256};
 for(int r=0;r<rounds;r++) for(int m=0;m<2;m++) for(int bi=0;bi<3;bi++){
   job j={batches[bi],m,200000,0}; run(&j); printf("%d\t%s\tbatch%d\t1thr\t%.0f\n",r,m?"miss":"hit",batches[bi],j.ops/j.secs);
   job js[2]={{batches[bi],m,200000,0},{batches[bi],m,200000,0}}; pthread_t t[2]; double t0=now();
   for(int x=0;x<2;x++) pthread_create(&t[x],0,run,&js[x]);
   for(int x=0;x<2;x++) pthread_join(t[x],0);
   printf("%d\t%s\tbatch%d\t2thr\t%.0f\n",r,m?"miss":"hit",batches[bi],400000/(now()-t0));
 }
 return 0;}
