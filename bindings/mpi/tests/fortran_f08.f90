! The collectives liboutboard_mpi takes over, called through `use mpi_f08`
! (ierror left out, as mpi_f08 allows, except where it is checked): barrier,
! broadcast, reductions with and without MPI_IN_PLACE, and the non-blocking
! forms completed with MPI_Wait, MPI_Waitall and MPI_Test, on
! MPI_COMM_WORLD and on a communicator from MPI_Comm_split. Checked and
! reported like fortran.f90: one line per check, then the count; stops with
! status 1 if any check failed.
program fortran_f08_collectives
    use mpi_f08
    implicit none
    integer :: wrank, wsize, checks, wrong
    type(MPI_Comm) :: split

    checks = 0
    wrong = 0
    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, wrank)
    call MPI_Comm_size(MPI_COMM_WORLD, wsize)
    call run(MPI_COMM_WORLD, 'MPI_COMM_WORLD')
    call MPI_Comm_split(MPI_COMM_WORLD, mod(wrank, 2), wsize - wrank, split)
    call MPI_Comm_set_name(split, 'fsplit')
    call run(split, 'fsplit')
    call MPI_Comm_free(split)
    print '(A,I0,A,I0,A,I0,A)', 'rank ', wrank, ': ', checks, ' checks, ', wrong, ' wrong'
    call MPI_Finalize()
    if (wrong > 0) stop 1

contains

    subroutine report(cname, what, ok)
        character(*), intent(in) :: cname, what
        logical, intent(in) :: ok
        checks = checks + 1
        if (ok) then
            print '(A,I0,5A)', 'rank ', wrank, ': ', cname, ' ', what, ': ok'
        else
            wrong = wrong + 1
            print '(A,I0,5A)', 'rank ', wrank, ': ', cname, ' ', what, ': WRONG'
        end if
    end subroutine

    subroutine run(comm, cname)
        type(MPI_Comm), intent(in) :: comm
        character(*), intent(in) :: cname
        integer, parameter :: n = 5
        integer :: rank, size, last, i, rc
        integer :: ib(n), isend(n), iw(n)
        double precision :: db(n), dsend(n), dw(n)
        type(MPI_Request) :: req, reqs(2)
        type(MPI_Status) :: st
        logical :: done

        call MPI_Comm_rank(comm, rank)
        call MPI_Comm_size(comm, size)
        last = size - 1
        isend = [((rank + 1) * i, i = 1, n)]
        iw = [(i * size * (size + 1) / 2, i = 1, n)]
        dsend = [(rank * 1.5d0 + 0.25d0 * i, i = 1, n)]
        dw = [(last * 1.5d0 + 0.25d0 * i, i = 1, n)]

        call MPI_Barrier(comm, rc)
        call report(cname, 'MPI_Barrier', rc == MPI_SUCCESS)

        ib = -1
        if (rank == last) ib = [(100 + i, i = 1, n)]
        call MPI_Bcast(ib, n, MPI_INTEGER, last, comm)
        call report(cname, 'MPI_Bcast INTEGER', all(ib == [(100 + i, i = 1, n)]))

        db = dsend
        if (rank == 0) then
            call MPI_Reduce(MPI_IN_PLACE, db, n, MPI_DOUBLE_PRECISION, MPI_MAX, 0, comm)
        else
            call MPI_Reduce(dsend, db, n, MPI_DOUBLE_PRECISION, MPI_MAX, 0, comm)
        end if
        call report(cname, 'MPI_Reduce max DOUBLE PRECISION in place', rank /= 0 .or. all(db == dw))

        ib = isend
        call MPI_Allreduce(MPI_IN_PLACE, ib, n, MPI_INTEGER, MPI_SUM, comm, rc)
        call report(cname, 'MPI_Allreduce sum INTEGER in place', rc == MPI_SUCCESS .and. all(ib == iw))

        call MPI_Ibarrier(comm, req)
        call MPI_Wait(req, MPI_STATUS_IGNORE)
        call report(cname, 'MPI_Ibarrier + MPI_Wait', req == MPI_REQUEST_NULL)

        db = 0
        call MPI_Iallreduce(dsend, db, n, MPI_DOUBLE_PRECISION, MPI_MAX, comm, req)
        call MPI_Wait(req, st, rc)
        call report(cname, 'MPI_Iallreduce max DOUBLE PRECISION + MPI_Wait', rc == MPI_SUCCESS .and. all(db == dw))

        ib = -1
        if (rank == 0) ib = [(3 * i, i = 1, n)]
        db = dsend
        call MPI_Ibcast(ib, n, MPI_INTEGER, 0, comm, reqs(1))
        call MPI_Ireduce(isend, iw, n, MPI_INTEGER, MPI_SUM, last, comm, reqs(2))
        call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE)
        call report(cname, 'MPI_Ibcast + MPI_Ireduce + MPI_Waitall', all(ib == [(3 * i, i = 1, n)]) .and. &
            (rank /= last .or. all(iw == [(i * size * (size + 1) / 2, i = 1, n)])))

        ib = 0
        call MPI_Iallreduce(isend, ib, n, MPI_INTEGER, MPI_SUM, comm, req)
        done = .false.
        do while (.not. done)
            call MPI_Test(req, done, MPI_STATUS_IGNORE)
        end do
        call report(cname, 'MPI_Iallreduce sum INTEGER + MPI_Test', all(ib == [(i * size * (size + 1) / 2, i = 1, n)]))
    end subroutine
end program
